"""Whole snodo processes of several installations or exports, alternating round by round.

Operations: `snodo run --mock` with `true` validators (run_overhead.py's protocol), `snodo
protocol check`, `snodo --help`, `snodo verify main..work` on N attested commits (verify.py's
repository). Each variant has its own SNODO_HOME and repository, warmed by one unmeasured
round; printed are wall and CPU (the process tree's user+sys) medians, and ratios to the
first variant. How issue 42's shims were measured (before/after each, and main against the
branch).

    python benchmarks/ab.py --variant main=/path/to/main/.venv/bin/python \
        --variant new=.venv/bin/python --variant prev=.venv/bin/python:/tmp/export-of-prev \
        [--ops run,check,help,verify] [--rounds 9] [--commits 1000] [--smoke]

A variant is NAME=PYTHON[:PYTHONPATH] (an export of `snodo/` from another commit, byte-compiled
with `python -m compileall`, on PYTHONPATH). Without --variant: this interpreter alone.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))


from _common import compile_bytecode


def measured(argv: list[str], cwd: Path, env: dict[str, str]) -> tuple[float, float, int, str]:
    started = time.perf_counter()
    proc = subprocess.Popen(argv, cwd=cwd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    err = proc.stderr.read().decode(errors="replace") if proc.stderr else ""
    _pid, status, usage = os.wait4(proc.pid, 0)
    wall = time.perf_counter() - started
    return wall, usage.ru_utime + usage.ru_stime, os.waitstatus_to_exitcode(status), err


def git(repo: Path, *args: str) -> None:
    subprocess.run(["git", "-C", str(repo), *args], check=True, capture_output=True)


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--variant", action="append", default=[], help="NAME=PYTHON[:PYTHONPATH], repeated")
    p.add_argument("--ops", default="run,check,help")
    p.add_argument("--rounds", type=int, default=7)
    p.add_argument("--commits", type=int, default=1000)
    p.add_argument("--smoke", action="store_true", help="one quick round (CI); fails on any error")
    a = p.parse_args()
    if a.smoke:
        a.rounds, a.commits, a.ops = 1, 20, "run,check,help,verify"
    compile_bytecode()  # as an installed snodo has it (see _common.compile_bytecode)
    if not a.variant:
        a.variant = [f"ours={sys.executable}"]
    variants = {}
    for spec in a.variant:
        name, _, rest = spec.partition("=")
        python, _, path = rest.partition(":")
        variants[name] = (python, path)
    ops = a.ops.split(",")
    with tempfile.TemporaryDirectory(prefix="ab-") as tmp:
        root = Path(tmp)
        base_env = {k: v for k, v in os.environ.items() if not k.startswith("SNODO_") and k != "PYTHONPATH"}
        base_env["LITELLM_LOCAL_MODEL_COST_MAP"] = "True"
        envs = {}
        for name, (_py, path) in variants.items():
            env = {**base_env, "SNODO_HOME": str(root / f"home-{name}")}
            if path:
                env["PYTHONPATH"] = path
            envs[name] = env
        repos: dict[str, Path] = {}
        if "run" in ops or "check" in ops or "help" in ops:
            from run_overhead import PROTOCOL

            for name in variants:
                repo = root / f"repo-{name}"
                repo.mkdir()
                git(repo, "init", "-q", "-b", "main")
                git(repo, "config", "user.email", "b@example.com")
                git(repo, "config", "user.name", "bench")
                (repo / ".snodo").mkdir()
                (repo / ".snodo" / "protocol.yml").write_text(PROTOCOL)
                (repo / "README.md").write_text("bench\n")
                git(repo, "add", "-A")
                git(repo, "commit", "-q", "-m", "init")
                repos[name] = repo
        vrepo = None
        if "verify" in ops:
            from verify import build

            vrepo = root / "verify"
            vrepo.mkdir()
            build(vrepo, a.commits)

        def argv(name: str, op: str, i: int) -> tuple[list[str], Path]:
            py = variants[name][0]
            if op == "run":
                return [py, "-m", "snodo", "run", f"add hello {i}", "--json"], repos[name]
            if op == "check":
                return [py, "-m", "snodo", "protocol", "check"], repos[name]
            if op == "help":
                return [py, "-m", "snodo", "--help"], repos[name]
            if op == "verify":
                assert vrepo is not None
                return [py, "-m", "snodo", "verify", "main..work"], vrepo
            raise SystemExit(op)

        results: dict[tuple[str, str], list[tuple[float, float]]] = {}
        for r in range(a.rounds + 1):
            for op in ops:
                order = list(variants) if r % 2 == 0 else list(reversed(variants))
                for name in order:
                    cmd, cwd = argv(name, op, r)
                    wall, cpu, code, err = measured(cmd, cwd, envs[name])
                    if code != 0:
                        raise SystemExit(f"{name} {op} exited {code}: {err[-2000:]}")
                    if r:  # round 0 warms homes and caches
                        results.setdefault((op, name), []).append((wall, cpu))
        print(f"{a.rounds} alternating rounds; load {os.getloadavg()[0]:.1f} on {os.cpu_count()} CPUs")
        for op in ops:
            first = None
            for name in variants:
                samples = results[(op, name)]
                w = statistics.median(s[0] for s in samples)
                c = statistics.median(s[1] for s in samples)
                rel = (
                    ""
                    if first is None
                    else f"  wall x{w / first[0]:.3f} cpu x{c / first[1]:.3f} vs {next(iter(variants))}"
                )
                first = first or (w, c)
                print(f"  {op:<7} {name:<10} wall {w * 1000:8.1f} ms  cpu {c * 1000:8.1f} ms{rel}")


if __name__ == "__main__":
    main()
