"""Confinement cost, side by side in one run, with every protection on (the policy the
governance layer builds from the protocol: protected paths, limits, hidden ``$SNODO_HOME``;
allowlisted environment, private /tmp and /run, resource limits, the pids cgroup and a user
namespace as root; under Landlock capabilities dropped, the socket filter, the subreaper).

Each iteration runs, in a rotating order so machine noise hits all alike:

- ``true`` unconfined through ``snodo.api.run_process`` (no confinement context);
- bubblewrap alone: the very argument vector snodo builds for a per-command bubblewrap start
  of that ``true`` (same namespaces, mounts and limits), started by a plain ``subprocess.run``;
- ``true`` through ``snodo.api.run_process`` under the confinement context (as validators
  and ``run_tests`` use it): bubblewrap, then Landlock;

and once per round a post_execute pytest validator through the governance runner
(unconfined, bubblewrap, Landlock). Printed: medians, the wall time snodo's own process
spends per run (CPU, which the machine's load does not inflate as much), and the targets:

- (a) a confined ``true`` costs at most 5 ms more than an unconfined one (bubblewrap; Landlock
  reported against the same bound);
- (b) snodo's confined path adds at most 1 ms to what bubblewrap alone costs.

    .venv/bin/python benchmarks/sandbox_overhead.py [rounds] [--smoke]

``--smoke``: one short round; exits non-zero only if some work fails (timings are printed,
not enforced: one iteration is noise).
"""

from __future__ import annotations

import contextlib
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")

from snodo import api
from snodo.governance.runner import PhaseInput, run_phase
from snodo.governance.service import Project
from snodo.plugin.host import get_plugin_manager
from snodo.protocol import load_protocol
from snodo.sandbox import SandboxPolicy, confined, forget_probes
from snodo.sandbox.bwrap import BwrapBackend
from snodo.sandbox.choose import FORCE_ENV
from snodo.sandbox.environ import confined_environment, make_private_dir
from snodo.sandbox.harden import program_fd

TARGET_A_MS = 5.0  # confined true over unconfined true
TARGET_B_MS = 1.0  # snodo's confined path over bwrap alone, same argv
TRUE_REPEAT = 20  # ``true`` iterations per round
PROTOCOL = """\
protocol_id: bench
name: bench
initial_mode: producer
protected_paths: ["config/**", "*.lock"]
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
    (root / "config").mkdir()
    (root / "config" / "prod.yml").write_text("db: prod\n")
    (root / "uv.lock").write_text("lock\n")
    (root / "tests").mkdir()
    (root / "tests" / "test_m.py").write_text(
        "".join(f"def test_{j}():\n    assert sum(range({j})) >= 0\n" for j in range(20))
    )
    subprocess.run(["git", "-C", str(root), "add", "."], check=True)
    subprocess.run(["git", "-C", str(root), "commit", "-q", "-m", "bench"], check=True)
    return root


def _own_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


class Samples:
    def __init__(self) -> None:
        self.wall: dict[str, list[float]] = {}
        self.cpu: dict[str, list[float]] = {}

    def measure(self, name: str, fn: Callable[[], None]) -> None:
        cpu, started = _own_cpu(), time.perf_counter()
        fn()
        self.wall.setdefault(name, []).append((time.perf_counter() - started) * 1000)
        self.cpu.setdefault(name, []).append((_own_cpu() - cpu) * 1000)

    def median(self, name: str) -> float:
        return statistics.median(self.wall[name])

    def paired(self, name: str, base: str) -> float:
        """Median of the per-iteration differences (the same iteration, so the same load)."""
        return statistics.median(a - b for a, b in zip(self.wall[name], self.wall[base], strict=True))


def main() -> int:
    smoke = "--smoke" in sys.argv
    args = [a for a in sys.argv[1:] if a != "--smoke"]
    rounds = 1 if smoke else int(args[0]) if args else 5
    repeat = 3 if smoke else TRUE_REPEAT
    base = Path(tempfile.mkdtemp(prefix="snodo-bench-sandbox-"))
    # ``$SNODO_HOME`` where it usually is, beside the user's other files (not among the
    # hundreds of entries of a shared /tmp, which Landlock would have to grant one by one).
    try:
        home = Path(tempfile.mkdtemp(prefix=".snodo-bench-", dir=Path.home()))
    except OSError:  # a read-only home (some CI runners)
        home = Path(tempfile.mkdtemp(prefix="snodo-bench-home-"))
    os.environ["SNODO_HOME"] = str(home)
    forced = os.environ.get(FORCE_ENV)
    try:
        root = _project(base / "repo")
        loaded = load_protocol(root / ".snodo" / "protocol.yml")
        host = get_plugin_manager()
        project = Project(loaded, host, mode="producer", home=home)
        policy = project.sandbox_policy()

        def backend(name: str) -> None:
            os.environ[FORCE_ENV] = name

        def true_(sandbox: SandboxPolicy | None) -> None:
            with confined(sandbox):
                assert api.run_process(["true"], cwd=root, timeout=30).ok

        def validator(sandbox: SandboxPolicy | None) -> None:
            inp = PhaseInput(
                protocol=loaded.protocol,
                mode=project.mode,
                phase="post_execute",
                task_id="t",
                task_spec="s",
                workspace=root,
                sandbox=sandbox,
            )
            result = run_phase(host, inp)[0]
            assert result.severity == "pass", result

        for name in ("landlock", "bwrap"):  # probe once, outside the timings (cached per process)
            backend(name)
            true_(policy)
        # The very argv snodo builds for a per-command bubblewrap start of ``true``.
        env = dict(os.environ)
        env["PWD"] = str(root)
        bare_tmp = make_private_dir()
        bare_env = confined_environment(env, named=policy.env, tmpdir=bare_tmp)
        with contextlib.ExitStack() as cleanups:  # its seccomp descriptor: bubblewrap reads one per start, made below
            prepared = BwrapBackend().prepare(
                ["true"], cwd=root, env=bare_env, policy=policy, tmpdir=bare_tmp, cleanups=cleanups
            )
        at = prepared.argv.index("--seccomp") + 1

        def bare() -> None:
            fd = program_fd()
            argv = [*prepared.argv[:at], str(fd), *prepared.argv[at + 1 :]]
            try:
                done = subprocess.run(argv, cwd=root, env=prepared.env, check=False, pass_fds=(fd,))
            finally:
                os.close(fd)
            assert done.returncode == 0, done

        def unconfined() -> None:
            true_(None)

        def snodo_bwrap() -> None:
            backend("bwrap")
            true_(policy)

        def snodo_landlock() -> None:
            backend("landlock")
            true_(policy)

        trues: dict[str, Callable[[], None]] = {
            "unconfined true": unconfined,
            "bwrap alone (snodo's argv)": bare,
            "snodo confined true, bwrap": snodo_bwrap,
            "snodo confined true, landlock": snodo_landlock,
        }
        phases: dict[str, Callable[[], None]] = {
            "pytest validator, unconfined": lambda: validator(None),
            "pytest validator, bwrap": lambda: (backend("bwrap"), validator(policy))[1],
            "pytest validator, landlock": lambda: (backend("landlock"), validator(policy))[1],
        }
        samples = Samples()
        turn = 0
        for _ in range(rounds):
            for _ in range(repeat):
                names = list(trues)
                names = names[turn % len(names) :] + names[: turn % len(names)]
                turn += 1
                for name in names:
                    samples.measure(name, trues[name])
            names = list(phases)
            for name in names[turn % len(names) :] + names[: turn % len(names)]:
                samples.measure(name, phases[name])
        shutil.rmtree(bare_tmp, ignore_errors=True)

        print(
            f"{rounds} round(s) x {repeat} true iterations; {os.cpu_count()} cores; "
            f"load {os.getloadavg()[0]:.1f}; Python {sys.version.split()[0]}; uid {os.getuid()}"
        )
        print(f"{'':34} {'wall median':>12} {'snodo CPU median':>17}")
        for name in (*trues, *phases):
            print(f"  {name:<32} {samples.median(name):9.2f} ms {statistics.median(samples.cpu[name]):13.2f} ms")
        a_bwrap = samples.paired("snodo confined true, bwrap", "unconfined true")
        a_landlock = samples.paired("snodo confined true, landlock", "unconfined true")
        b_bwrap = samples.paired("snodo confined true, bwrap", "bwrap alone (snodo's argv)")
        checks = [
            ("(a) confined true - unconfined true, bwrap", a_bwrap, TARGET_A_MS, True),
            ("(a) confined true - unconfined true, landlock", a_landlock, TARGET_A_MS, False),
            ("(b) snodo confined (bwrap) - bwrap alone", b_bwrap, TARGET_B_MS, True),
        ]
        print("targets (median of the per-iteration differences):")
        failed = False
        for label, value, target, enforced in checks:
            verdict = "PASS" if value <= target else "FAIL"
            failed |= enforced and value > target
            print(f"  {label:<48} {value:+7.2f} ms (<= {target:g} ms) {verdict}{'' if enforced else ' (reported)'}")
        return 0 if smoke or not failed else 1
    finally:
        if forced is None:
            os.environ.pop(FORCE_ENV, None)
        else:
            os.environ[FORCE_ENV] = forced
        forget_probes()
        shutil.rmtree(base, ignore_errors=True)
        shutil.rmtree(home, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
