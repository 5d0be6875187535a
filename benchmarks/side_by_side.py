"""The same governed work through this snodo and, given its path, another installation.

Each implementation gets its own copy of the same repository and its own ``$SNODO_HOME``;
runs alternate between them (after one warm-up each) so machine noise falls on both alike.
Work measured:

- ``trivial``: ``snodo run --mock`` with a pre_execute and a post_execute validator that run ``true``;
- ``pytest``: the same with ``python -m compileall -q .`` before and pytest after the coder;
- ``by hand``: the pytest work done without governance (write the files, run the same
  commands, ``git commit``), the floor for ours / raw;
- over MCP (``--mcp-servers N``, a real client from the official SDK, stdio): ``snodo serve
  --mode producer`` started N times per side, alternating: start -> initialized, then one
  first and ``--calls`` warm ``validate_task`` calls (``{task_id, task_spec}``, the same
  arguments on both sides) against the trivial protocol, whose one pre_execute validator
  runs ``true``; every call must answer without an error.

    python benchmarks/side_by_side.py [--other /work/ref] [--runs 5] [--smoke]

``--other`` is a virtualenv (or its ``bin/snodo``) holding the other installation, e.g. the
reference: ``python3.12 -m venv /work/ref && /work/ref/bin/pip install snodo==0.26.0``. It is
run as a black box, through its command line only: ``init --template solo --yes`` (with a
private ``$HOME`` for the keys it generates), then its protocol, then ``run SPEC --mock``.

One protocol per dialect, the same work in each (``--other-dialect``; ``reference`` by
default, ``ours`` when the other installation is another build of this one):

- ours: a ``pytest`` validator whose ``tooling.command`` runs the command (confined), or, with
  no command, runs pytest itself;
- the reference's ``pytest`` type is a criteria judge (with no criteria it warns "nothing to
  evaluate", and its unanimous policy escalates: no work happens), so its equivalent is the
  ``quality`` type, which runs ``tooling.test_command`` and passes on exit status 0; it also
  wants ``initial_mode`` and a mode ``name``.

Both sides' mock coders write a module and a passing test, then commit on a task branch. A
run counts only when it exits 0 (the reference exits 1 on an escalation). ``python`` on
``PATH`` is this interpreter, in its environment, for every side (:func:`python_dir`), so the
validators and the by-hand work run the same program. Wall
time is what a user waits; CPU time (user + system of the whole process tree) is printed
beside it because on a shared machine wall time swings with the load.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from _common import compile_bytecode, warm_pytest_rewrite_cache

OURS = """\
protocol_id: bench
name: bench
modes:
  - mode_id: producer
    name: producer
    tools: [read, edit, validate, dispatch, commit]
    validators: [pre, post]
    coder: mock
validators:
  - {{validator_id: pre, validator_type: command, tooling: {{command: "{pre}"}}}}
  - {{validator_id: post, validator_type: {post_type}, evaluation_phase: post_execute{post}}}
"""
REFERENCE = """\
protocol_id: bench
name: bench
initial_mode: producer
modes:
  - mode_id: producer
    name: producer
    tools: [read, edit, validate, dispatch, commit]
    validators: [pre, post]
    coder: mock
validators:
  - {{validator_id: pre, validator_type: quality, tooling: {{test_command: "{pre}"}}}}
  - {{validator_id: post, validator_type: quality, evaluation_phase: post_execute, tooling: {{test_command: "{post}"}}}}
"""
PYTEST = "python -m pytest -q -p no:cacheprovider"
WORK = {
    "trivial": {
        "ours": {"pre": "true", "post_type": "command", "post": ', tooling: {command: "true"}'},
        "reference": {"pre": "true", "post": "true"},
    },
    "pytest": {
        "ours": {"pre": "python -m compileall -q .", "post_type": "pytest", "post": ""},
        "reference": {"pre": "python -m compileall -q .", "post": PYTEST},
    },
}
DIALECTS = {"ours": OURS, "reference": REFERENCE}
#: The mock coder's files, written by hand for the ungoverned baseline.
RAW = f"""\
set -e
printf 'def hello():\\n    return "hello"\\n' > hello_$1.py
mkdir -p tests
printf 'import hello_%s\\n\\ndef test_hello():\\n    assert hello_%s.hello()\\n' $1 $1 > tests/test_hello_$1.py
python -m compileall -q .
{PYTEST} >/dev/null
git add hello_$1.py tests/test_hello_$1.py
git commit -q -m "raw $1"
"""


def _git(repo: Path, *args: str) -> None:
    subprocess.run(["git", "-C", str(repo), *args], check=True, capture_output=True)


def make_repo(
    path: Path, protocol: str | None, *, init: list[str] | None = None, env: dict[str, str] | None = None
) -> Path:
    """The benchmark repository; ``init`` (another installation's ``init`` command) runs
    first so that installation finds the project files and keys it expects, then
    ``protocol`` replaces the one it wrote."""
    path.mkdir(parents=True)
    _git(path, "init", "-q", "-b", "main")
    _git(path, "config", "user.email", "b@example.com")
    _git(path, "config", "user.name", "bench")
    (path / "README.md").write_text("bench\n")
    if init is not None:
        subprocess.run(init, cwd=path, env=env, capture_output=True, stdin=subprocess.DEVNULL, check=True)
    if protocol is not None:
        (path / ".snodo").mkdir(exist_ok=True)
        (path / ".snodo" / "protocol.yml").write_text(protocol)
    with (path / ".gitignore").open("a") as ignore:
        ignore.write("__pycache__/\n.pytest_cache/\n")
    _git(path, "add", "-A")
    _git(path, "commit", "-q", "-m", "init")
    return path


def program(other: Path | None) -> list[str]:
    """How to start an implementation: ours with this interpreter, another by its script."""
    if other is None:
        return [sys.executable, "-I", "-m", "snodo"]
    script = other if other.is_file() else other / "bin" / "snodo"
    if not script.is_file():
        raise SystemExit(f"no snodo program at {script}")
    return [str(script)]


def python_dir(root: Path) -> Path:
    """A directory whose ``python`` is this interpreter *in its environment*, for every side.

    A symlink to ``sys.executable`` elsewhere is not that: started through a link outside
    its virtualenv, Python finds no ``pyvenv.cfg`` and runs as the base interpreter, with
    the base's site-packages (another pytest, other plugins), so the by-hand work ran a
    lighter program than the validators (which resolve ``python`` to snodo's interpreter).
    The interpreter's own directory is used when its ``python`` is this one; else a script
    that ``exec``s it by its full path.
    """
    own = Path(sys.executable).parent
    candidate = own / "python"
    if candidate.is_file() and os.path.samefile(candidate, sys.executable):
        return own
    shim = root / "bin"
    shim.mkdir(exist_ok=True)
    script = shim / "python"
    script.write_text(f'#!/bin/sh\nexec "{sys.executable}" "$@"\n')
    script.chmod(0o755)
    return shim


def timed(argv: list[str], cwd: Path, env: dict[str, str]) -> tuple[float, float]:
    """Run to completion; (wall seconds, CPU seconds of the process and its children)."""
    started = time.perf_counter()
    proc = subprocess.Popen(
        argv, cwd=cwd, env=env, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.STDOUT
    )
    out = proc.stdout.read() if proc.stdout else b""
    _pid, status, usage = os.wait4(proc.pid, 0)
    elapsed = time.perf_counter() - started
    if os.waitstatus_to_exitcode(status) != 0:
        tail = out.decode(errors="replace")[-1500:]
        raise SystemExit(f"{' '.join(argv[:5])} … failed in {cwd} ({os.waitstatus_to_exitcode(status)}):\n{tail}")
    return elapsed, usage.ru_utime + usage.ru_stime


async def _serve_once(argv: list[str], repo: Path, env: dict[str, str], calls: int) -> tuple[float, float]:
    """(start -> initialized, median warm validate_task) of one server."""
    from mcp.client.stdio import StdioServerParameters

    params = StdioServerParameters(
        command=argv[0], args=[*argv[1:], "serve", "--mode", "producer"], cwd=str(repo), env=env
    )
    with open(os.devnull, "w") as quiet:  # a server's shutdown noise is not a measurement
        return await _session(params, quiet, calls)


async def _session(params: Any, errlog: Any, calls: int) -> tuple[float, float]:
    from mcp.client.session import ClientSession
    from mcp.client.stdio import stdio_client

    started = time.perf_counter()
    async with stdio_client(params, errlog=errlog) as (read, write), ClientSession(read, write) as session:
        await session.initialize()
        initialized = time.perf_counter() - started
        warm: list[float] = []
        for i in range(calls + 1):  # the first call is not warm
            t = time.perf_counter()
            result = await session.call_tool("validate_task", {"task_id": f"t-{i}", "task_spec": f"add module {i}"})
            if result.is_error:
                raise SystemExit(f"validate_task failed: {str(result.content)[:800]}")
            if i == 0:
                print(f"  mcp      first validate_task answered: {str(result.content)[:300]}", file=sys.stderr)
            if i:
                warm.append(time.perf_counter() - t)
    return initialized, statistics.median(warm)


def measure_mcp(
    impls: dict[str, list[str]], repos: dict[str, Path], envs: dict[str, dict[str, str]], servers: int, calls: int
) -> dict[str, tuple[float, float]]:
    """Medians over ``servers`` alternating server starts of each side."""
    samples: dict[str, list[tuple[float, float]]] = {name: [] for name in impls}
    for n in range(servers):
        for name, argv in impls.items():
            sample = asyncio.run(_serve_once(argv, repos[name], envs[name], calls))
            samples[name].append(sample)
            print(
                f"  mcp      {name:<6} server {n + 1}: initialized {sample[0]:7.3f}s, "
                f"warm validate_task {sample[1] * 1e3:7.2f} ms",
                file=sys.stderr,
                flush=True,
            )
    return {
        name: (statistics.median(s[0] for s in v), statistics.median(s[1] for s in v)) for name, v in samples.items()
    }


def _cell(value: float | None, fmt: str) -> str:
    return fmt.format(value) if value is not None else "-"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--other", type=Path, help="another snodo installation (a virtualenv or its bin/snodo)")
    parser.add_argument(
        "--other-dialect", choices=sorted(DIALECTS), default="reference", help="the protocol form the other one reads"
    )
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--work", choices=sorted(WORK), action="append", help="only this work (repeatable)")
    parser.add_argument("--mcp-servers", type=int, default=3, help="server starts per side over MCP (0: none)")
    parser.add_argument("--calls", type=int, default=20, help="warm validate_task calls per server")
    parser.add_argument("--no-runs", action="store_true", help="only the MCP measurements")
    parser.add_argument("--smoke", action="store_true", help="one run each, ours only unless --other is given")
    args = parser.parse_args()
    compile_bytecode()  # as an installed snodo has it (see _common.compile_bytecode)
    warm_pytest_rewrite_cache(sys.executable)
    runs = 1 if args.smoke else args.runs
    works = [] if args.no_runs else args.work or list(WORK)
    servers, calls = (1, 3) if args.smoke else (args.mcp_servers, args.calls)
    impls = {"ours": program(None), **({"other": program(args.other)} if args.other else {})}
    load_before = os.getloadavg()[0]
    dialect = {"ours": "ours", "other": args.other_dialect}
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        base_env = {k: v for k, v in os.environ.items() if not k.startswith("SNODO_")}
        base_env["LITELLM_LOCAL_MODEL_COST_MAP"] = "True"
        base_env["PATH"] = os.pathsep.join([str(python_dir(root)), base_env.get("PATH", "")])
        wall: dict[tuple[str, str], float] = {}
        cpu: dict[tuple[str, str], float] = {}
        for work in works:
            envs = {}
            for name in impls:
                envs[name] = {**base_env, "SNODO_HOME": str(root / work / f"{name}-home")}
                if name == "other":  # its keys live under $HOME: a private one
                    envs[name]["HOME"] = str(root / work / "other-user")
            repos = {
                name: make_repo(
                    root / work / name,
                    DIALECTS[dialect[name]].format(**WORK[work][dialect[name]]),
                    init=[*argv, "init", "--template", "solo", "--yes"]
                    if name == "other" and dialect[name] == "reference"
                    else None,
                    env=envs[name],
                )
                for name, argv in impls.items()
            }
            samples: dict[str, list[tuple[float, float]]] = {name: [] for name in impls}
            raw: list[tuple[float, float]] = []
            if work == "pytest":  # by hand alternates with the governed runs too
                raw_repo = make_repo(root / "raw", None)
                script = root / "raw.sh"
                script.write_text(RAW)
            for n in range(runs + 1):  # the first round is the warm-up
                if work == "pytest":
                    sample = timed(["bash", str(script), str(n)], raw_repo, base_env)
                    if n:
                        raw.append(sample)
                        print(
                            f"  {work:<8} {'hand':<6} run {n}: {sample[0]:7.3f}s wall {sample[1]:7.3f}s cpu",
                            file=sys.stderr,
                            flush=True,
                        )
                for name, argv in impls.items():
                    sample = timed([*argv, "run", f"add hello {n}", "--mock"], repos[name], envs[name])
                    if n:
                        samples[name].append(sample)
                        print(
                            f"  {work:<8} {name:<6} run {n}: {sample[0]:7.3f}s wall {sample[1]:7.3f}s cpu",
                            file=sys.stderr,
                            flush=True,
                        )
            for name in impls:
                wall[(work, name)] = statistics.median(s[0] for s in samples[name])
                cpu[(work, name)] = statistics.median(s[1] for s in samples[name])
            if raw:
                wall[(work, "by hand")] = statistics.median(s[0] for s in raw)
                cpu[(work, "by hand")] = statistics.median(s[1] for s in raw)
            shutil.rmtree(root / work, ignore_errors=True)
        mcp: dict[str, tuple[float, float]] = {}
        if servers:
            envs = {name: {**base_env, "SNODO_HOME": str(root / "mcp" / f"{name}-home")} for name in impls}
            if "other" in envs:
                envs["other"]["HOME"] = str(root / "mcp" / "other-user")
            repos = {
                name: make_repo(
                    root / "mcp" / name,
                    DIALECTS[dialect[name]].format(**WORK["trivial"][dialect[name]]),
                    init=[*argv, "init", "--template", "solo", "--yes"]
                    if name == "other" and dialect[name] == "reference"
                    else None,
                    env=envs[name],
                )
                for name, argv in impls.items()
            }
            mcp = measure_mcp(impls, repos, envs, servers, calls)
        if works:
            print(
                f"{'work':<8} {'time':<5} {'ours':>9} {'other':>9} {'other/ours':>11} {'by hand':>9} {'ours/hand':>10}"
            )
        for work in works:
            for kind, table in (("wall", wall), ("cpu", cpu)):
                ours, other, hand = table[(work, "ours")], table.get((work, "other")), table.get((work, "by hand"))
                cells = [
                    f"{ours:8.3f}s",
                    f"{_cell(other, '{:8.3f}s'):>9}",
                    f"{_cell(other / ours if other else None, 'x{:.1f}'):>11}",
                    f"{_cell(hand, '{:8.3f}s'):>9}",
                    f"{_cell(ours / hand if hand else None, 'x{:.2f}'):>10}",
                ]
                print(f"{work:<8} {kind:<5} " + " ".join(cells))
        for index, what in ((0, "serve -> initialized"), (1, "warm validate_task, one `true` validator")):
            if mcp:
                ours, other = mcp["ours"][index], mcp.get("other", (None, None))[index]
                ratio = f", other/ours x{other / ours:.2f}" if other else ""
                shown = f", other {other * 1e3:.1f} ms" if other else ""
                print(f"{what:<42} ours {ours * 1e3:.1f} ms{shown}{ratio}")
        if mcp:
            print(f"MCP: medians over {servers} alternating server start(s), warm = median of {calls} calls each")
        if works:
            print(f"medians of {runs} alternating run(s) after one warm-up each; cpu = user + system, process tree")
        # wall time swings with what else the machine runs: say how busy it was
        load_after = os.getloadavg()[0]
        print(
            f"load average (1 min): {load_before:.1f} at the start, {load_after:.1f} at the end; {os.cpu_count()} CPUs"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
