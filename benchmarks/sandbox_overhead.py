"""Confinement cost: the same work confined (bubblewrap, Landlock) and unconfined, interleaved
in one run so machine noise hits all three alike, with every protection on (allowlisted
environment, private /tmp and /run, resource limits via prlimit, user namespace as root;
under Landlock capabilities dropped, the socket filter, subreaper sweep).

Measured: a bare ``true`` through ``snodo.proc.run_process`` (the pure per-process cost) next
to the same ``bwrap … true`` command line started directly (what bubblewrap alone costs), the
MCP ``run_tests`` tool's function on a small suite, and a post_execute pytest validator
through the governance runner (it starts two processes: ``git status`` and pytest).
Targets (medians): a confined ``true`` (bwrap) costs at most 5 ms more than an unconfined
one; extra cost per confined process of the heavier work < 50 ms.

    .venv/bin/python benchmarks/sandbox_overhead.py [rounds] [--smoke]

``--smoke``: one round (a few ``true`` runs), exits non-zero if any work fails; the timing
targets are printed but only enforced without ``--smoke``.
"""

from __future__ import annotations

import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")

from snodo.governance.runner import PhaseInput, run_phase
from snodo.plugins import get_plugin_manager
from snodo.proc import run_process
from snodo.protocol import load_protocol
from snodo.sandbox import SandboxPolicy, choose_backend, confined, forget_probes
from snodo.workspace.testrun import run_tests

TARGET_MS = 50.0
TRUE_TARGET_MS = 5.0
TRUE_REPEAT = 20  # ``true`` runs per round: it is short, so more samples
PROTOCOL = """\
protocol_id: bench
name: bench
modes:
  - mode_id: producer
    tools: [read, validate]
    validators: [suite]
    coder: mock
validators:
  - {validator_id: suite, validator_type: pytest, evaluation_phase: post_execute}
"""


def _project(root: Path) -> Path:
    root.mkdir(parents=True)
    for args in (["init", "-q", "-b", "main"], ["config", "user.email", "b@x"], ["config", "user.name", "b"]):
        subprocess.run(["git", "-C", str(root), *args], check=True)
    (root / ".snodo").mkdir()
    (root / ".snodo" / "protocol.yml").write_text(PROTOCOL)
    (root / "tests").mkdir()
    (root / "tests" / "test_m.py").write_text(
        "".join(f"def test_{j}():\n    assert sum(range({j})) >= 0\n" for j in range(20))
    )
    subprocess.run(["git", "-C", str(root), "add", "."], check=True)
    subprocess.run(["git", "-C", str(root), "commit", "-q", "-m", "bench"], check=True)
    return root


def main() -> int:
    smoke = "--smoke" in sys.argv
    args = [a for a in sys.argv[1:] if a != "--smoke"]
    rounds = 1 if smoke else int(args[0]) if args else 15
    repeat = 3 if smoke else TRUE_REPEAT
    base = Path(tempfile.mkdtemp(prefix="snodo-bench-sandbox-"))
    os.environ["SNODO_HOME"] = str(base / "home")
    try:
        root = _project(base / "repo")
        loaded = load_protocol(root / ".snodo" / "protocol.yml")
        host = get_plugin_manager()
        mode = loaded.protocol.mode("producer")
        policy = SandboxPolicy(workspace=root, hidden=(base / "home",))

        def phase(sandbox: SandboxPolicy | None) -> None:
            inp = PhaseInput(
                protocol=loaded.protocol,
                mode=mode,
                phase="post_execute",
                task_id="t",
                task_spec="s",
                workspace=root,
                sandbox=sandbox,
            )
            results = run_phase(host, inp)
            assert results[0].severity == "pass", results[0]

        def true_(sandbox: SandboxPolicy | None) -> None:
            assert run_process(["true"], cwd=root, timeout=30, sandbox=sandbox).ok

        def tests_(sandbox: SandboxPolicy | None) -> None:
            with confined(sandbox):
                assert run_tests(root, timeout=120).passed

        # What bubblewrap alone costs: the very command line snodo builds, started directly.
        os.environ["SNODO_SANDBOX_BACKEND"] = "bwrap"
        tmp = base / "bare-tmp"
        tmp.mkdir()
        bare = choose_backend().prepare(["true"], cwd=root, env={"PATH": os.environ["PATH"]}, policy=policy, tmpdir=tmp)

        def bare_bwrap() -> None:
            assert subprocess.run(bare.argv, cwd=root, env=bare.env, check=False).returncode == 0

        work: dict[str, Callable[[SandboxPolicy | None], None]] = {
            "true": true_,
            "run_tests tool": tests_,
            "post_execute pytest validator": phase,
        }
        modes = ("unconfined", "bwrap", "landlock")
        wall: dict[tuple[str, str], list[float]] = {(w, m): [] for w in work for m in modes}
        bare_runs: list[float] = []
        for name in modes[1:]:  # probe once, outside the timings (snodo caches it per process)
            os.environ["SNODO_SANDBOX_BACKEND"] = name
            true_(policy)
        for r in range(rounds):
            for w, fn in work.items():
                order = modes[r % 3 :] + modes[: r % 3]  # rotate, so no mode always runs first
                for _ in range(repeat if w == "true" else 1):
                    for m in order:
                        os.environ["SNODO_SANDBOX_BACKEND"] = m if m != "unconfined" else "bwrap"
                        started = time.perf_counter()
                        fn(None if m == "unconfined" else policy)
                        wall[(w, m)].append(time.perf_counter() - started)
                    if w == "true":
                        started = time.perf_counter()
                        bare_bwrap()
                        bare_runs.append(time.perf_counter() - started)
        print(
            f"rounds: {rounds}; {os.cpu_count()} cores; load {os.getloadavg()[0]:.1f}; Python {sys.version.split()[0]}"
        )
        print("extra wall time per confined process: median of the per-run differences (confined - unconfined);")
        print("noise: half the interquartile range of the unconfined runs")
        worst = true_extra = 0.0
        for w in work:
            processes = 2 if w.startswith("post_execute") else 1
            base_runs = wall[(w, "unconfined")]
            quartiles = statistics.quantiles(base_runs, n=4) if len(base_runs) > 1 else [base_runs[0]] * 3
            noise = (quartiles[2] - quartiles[0]) / 2 * 1000
            line = f"  {w:<30} unconfined {statistics.median(base_runs) * 1000:7.1f} ms (noise ±{noise:5.1f} ms)"
            for m in modes[1:]:
                diffs = [(a - b) * 1000 / processes for a, b in zip(wall[(w, m)], base_runs, strict=True)]
                extra = statistics.median(diffs)
                worst = max(worst, extra)
                if w == "true" and m == "bwrap":
                    true_extra = extra
                line += f" | {m} {extra:+7.1f} ms"
            print(line)
        unconfined_true = statistics.median(wall[("true", "unconfined")]) * 1000
        bwrap_true = statistics.median(wall[("true", "bwrap")]) * 1000
        bare_true = statistics.median(bare_runs) * 1000
        print(
            f"  true: unconfined {unconfined_true:.2f} ms, bwrap alone {bare_true:.2f} ms, "
            f"confined by snodo (bwrap) {bwrap_true:.2f} ms: snodo's part {bwrap_true - bare_true:+.2f} ms"
        )
        met = worst < TARGET_MS and true_extra <= TRUE_TARGET_MS
        print(
            f"confined true +{true_extra:.1f} ms (target <= {TRUE_TARGET_MS:g} ms); worst extra per confined "
            f"process {worst:.1f} ms (target < {TARGET_MS:g} ms): {'targets met' if met else 'target NOT met'}"
        )
        return 0 if met or smoke else 1
    finally:
        forget_probes()
        shutil.rmtree(base, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
