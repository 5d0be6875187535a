"""The same governed work through this snodo and, given its path, another installation.

Each implementation gets its own copy of the same repository and its own ``$SNODO_HOME``;
runs alternate between them (after one warm-up each) so machine noise falls on both alike.
Work measured:

- ``trivial``: ``snodo run --mock`` with validators that run ``true``;
- ``pytest``: the same with a pytest post_execute validator and a ``compileall`` pre_execute one;
- ``by hand``: the pytest work done without governance (write the files, run the same
  commands, ``git commit``), the floor for ours / raw.

    python benchmarks/side_by_side.py [--other /tmp/ref] [--runs 5] [--smoke]

``--other`` is a virtualenv (or its ``bin/snodo``) holding the other installation, e.g. the
reference: ``python3.12 -m venv /tmp/ref && /tmp/ref/bin/pip install snodo==0.26.0``. It is
run as a black box, through its command line only: ``init --template solo --yes`` (with a private
``$HOME`` for its keys), then the shared protocol, then ``run SPEC --mock``.
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

# `initial_mode` and a mode `name` are what the reference requires; ours accepts them.
PROTOCOL = """\
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
  - {{validator_id: pre, validator_type: pytest, tooling: {{command: "{pre}"}}}}
  - {{validator_id: post, validator_type: pytest, evaluation_phase: post_execute{post}}}
"""
WORK = {
    "trivial": {"pre": "true", "post": ', tooling: {command: "true"}'},
    "pytest": {"pre": "python -m compileall -q .", "post": ""},
}
#: The mock coder's files, written by hand for the ungoverned baseline.
RAW = """\
set -e
printf 'def hello():\\n    return "hello"\\n' > hello_$1.py
mkdir -p tests
printf 'import hello_%s\\n\\ndef test_hello():\\n    assert hello_%s.hello()\\n' $1 $1 > tests/test_hello_$1.py
python -m compileall -q .
python -m pytest -q -p no:cacheprovider >/dev/null
git add hello_$1.py tests/test_hello_$1.py
git commit -q -m "raw $1"
"""


def _git(repo: Path, *args: str) -> None:
    subprocess.run(["git", "-C", str(repo), *args], check=True, capture_output=True)


def make_repo(path: Path, work: str, *, init: list[str] | None = None, env: dict[str, str] | None = None) -> Path:
    """The benchmark repository; ``init`` (another installation's ``init`` command) runs
    first so that installation finds the project files and keys it expects, then the
    shared protocol replaces the one it wrote."""
    path.mkdir(parents=True)
    _git(path, "init", "-q", "-b", "main")
    _git(path, "config", "user.email", "b@example.com")
    _git(path, "config", "user.name", "bench")
    (path / "README.md").write_text("bench\n")
    if init is not None:
        subprocess.run(init, cwd=path, env=env, capture_output=True, stdin=subprocess.DEVNULL, check=True)
    (path / ".snodo").mkdir(exist_ok=True)
    (path / ".snodo" / "protocol.yml").write_text(PROTOCOL.format(**WORK[work]))
    (path / ".gitignore").write_text("__pycache__/\n.pytest_cache/\n")
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


def timed(argv: list[str], cwd: Path, env: dict[str, str]) -> float:
    started = time.perf_counter()
    done = subprocess.run(argv, cwd=cwd, env=env, capture_output=True, text=True)
    elapsed = time.perf_counter() - started
    if done.returncode != 0:
        raise SystemExit(f"{' '.join(argv[:4])} … failed in {cwd} ({done.returncode}): {done.stdout[-800:]}")
    return elapsed


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--other", type=Path, help="another snodo installation (a virtualenv or its bin/snodo)")
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--smoke", action="store_true", help="one run each, ours only unless --other is given")
    args = parser.parse_args()
    runs = 1 if args.smoke else args.runs
    impls = {"ours": program(None), **({"other": program(args.other)} if args.other else {})}
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        base_env = {k: v for k, v in os.environ.items() if not k.startswith("SNODO_")}
        base_env["LITELLM_LOCAL_MODEL_COST_MAP"] = "True"
        medians: dict[tuple[str, str], float] = {}
        for work in WORK:
            envs = {}
            for name in impls:
                envs[name] = {**base_env, "SNODO_HOME": str(root / work / f"{name}-home")}
                if name == "other":  # its keys live under $HOME: a private one
                    envs[name]["HOME"] = str(root / work / "other-user")
            repos = {
                name: make_repo(
                    root / work / name,
                    work,
                    init=[*argv, "init", "--template", "solo", "--yes"] if name == "other" else None,
                    env=envs[name],
                )
                for name, argv in impls.items()
            }
            samples: dict[str, list[float]] = {name: [] for name in impls}
            for n in range(runs + 1):  # the first round is the warm-up
                for name, argv in impls.items():
                    seconds = timed([*argv, "run", f"add hello {n}", "--mock"], repos[name], envs[name])
                    if n:
                        samples[name].append(seconds)
            for name in impls:
                medians[(work, name)] = statistics.median(samples[name])
            if work == "pytest":
                raw_repo = make_repo(root / "raw", work)
                script = root / "raw.sh"
                script.write_text(RAW)
                raw = [timed(["bash", str(script), str(n)], raw_repo, base_env) for n in range(runs + 1)][1:]
                medians[(work, "by hand")] = statistics.median(raw)
            shutil.rmtree(root / work, ignore_errors=True)
        print(f"{'work':<10} {'ours':>9} {'other':>9} {'other/ours':>11} {'by hand':>9} {'ours/hand':>10}")
        for work in WORK:
            ours = medians[(work, "ours")]
            other = medians.get((work, "other"))
            hand = medians.get((work, "by hand"))
            cells = [
                f"{ours:8.3f}s",
                f"{other:8.3f}s" if other else f"{'-':>9}",
                f"x{other / ours:9.1f}" if other else f"{'-':>11}",
                f"{hand:8.3f}s" if hand else f"{'-':>9}",
                f"x{ours / hand:8.2f}" if hand else f"{'-':>10}",
            ]
            print(f"{work:<10} " + " ".join(cells))
        print(f"medians of {runs} alternating run(s) after one warm-up each")
    return 0


if __name__ == "__main__":
    sys.exit(main())
