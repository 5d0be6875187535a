"""Confinement cost: the same work confined (bubblewrap, Landlock) and unconfined, interleaved
in one run so machine noise hits all three alike.

Measured: a bare ``true`` through ``snodo.proc.run_process`` (the pure per-process cost), the
MCP ``run_tests`` tool's function on a small suite, and a post_execute pytest validator
through the governance runner (it starts two processes: ``git status`` and pytest).
Target: extra cost per confined process < 50 ms median.

    .venv/bin/python benchmarks/sandbox_overhead.py [rounds]
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
from snodo.sandbox import SandboxPolicy, confined, forget_probes
from snodo.workspace.testrun import run_tests

TARGET_MS = 50.0
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


def main() -> None:
    # ROUNDS (default 15), or --smoke: the fewest rounds that give a spread (CI)
    rounds = 2 if sys.argv[1:] == ["--smoke"] else int(sys.argv[1]) if len(sys.argv) > 1 else 15
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

        work: dict[str, Callable[[SandboxPolicy | None], None]] = {
            "true": true_,
            "run_tests tool": tests_,
            "post_execute pytest validator": phase,
        }
        modes = ("unconfined", "bwrap", "landlock")
        wall: dict[tuple[str, str], list[float]] = {(w, m): [] for w in work for m in modes}
        for name in modes[1:]:  # probe once, outside the timings (snodo caches it per process)
            os.environ["SNODO_SANDBOX_BACKEND"] = name
            true_(policy)
        for r in range(rounds):
            for w, fn in work.items():
                order = modes[r % 3 :] + modes[: r % 3]  # rotate, so no mode always runs first
                for m in order:
                    os.environ["SNODO_SANDBOX_BACKEND"] = m if m != "unconfined" else "bwrap"
                    started = time.perf_counter()
                    fn(None if m == "unconfined" else policy)
                    wall[(w, m)].append(time.perf_counter() - started)
        print(
            f"rounds: {rounds}; {os.cpu_count()} cores; load {os.getloadavg()[0]:.1f}; Python {sys.version.split()[0]}"
        )
        print("extra wall time per confined process: median of the per-round differences (confined - unconfined);")
        print("noise: half the interquartile range of the unconfined runs")
        worst = 0.0
        for w in work:
            processes = 2 if w.startswith("post_execute") else 1
            base_runs = wall[(w, "unconfined")]
            quartiles = statistics.quantiles(base_runs, n=4)
            noise = (quartiles[2] - quartiles[0]) / 2 * 1000
            line = f"  {w:<30} unconfined {statistics.median(base_runs) * 1000:7.1f} ms (noise ±{noise:5.1f} ms)"
            for m in modes[1:]:
                diffs = [(a - b) * 1000 / processes for a, b in zip(wall[(w, m)], base_runs, strict=True)]
                extra = statistics.median(diffs)
                worst = max(worst, extra)
                line += f" | {m} {extra:+7.1f} ms"
            print(line)
        verdict = "target met" if worst < TARGET_MS else "target NOT met"
        print(f"worst extra wall time per confined process {worst:.1f} ms (target < {TARGET_MS:g} ms): {verdict}")
    finally:
        forget_probes()
        shutil.rmtree(base, ignore_errors=True)


if __name__ == "__main__":
    main()
