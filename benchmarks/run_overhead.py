"""Governance overhead of `snodo run --mock` against the same raw work done without snodo.

The protocol's validators run `true`, so what is measured is snodo itself: loading the
protocol and plugins, validation bookkeeping, tokens, audit, the worktree and the commit.
The baseline does the raw work as whole processes too: write the mock coder's two files
and `git commit` them on a new branch.

Targets (issue 4): overhead under 0.5 s per run and peak memory under 80 MiB, with no
model library or MCP SDK imported on this path.

    python benchmarks/run_overhead.py [--runs 7] [--smoke]
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import compile_bytecode, run_measured, summary

PROTOCOL = """\
protocol_id: bench
name: bench
modes:
  - mode_id: producer
    tools: [read, edit, validate, dispatch, commit]
    validators: [pre, post]
    coder: mock
validators:
  - {validator_id: pre, validator_type: command, tooling: {command: "true"}}
  - {validator_id: post, validator_type: command, evaluation_phase: post_execute, tooling: {command: "true"}}
"""

RAW = """\
set -e
git checkout -q -b "raw-$1"
mkdir -p tests
printf 'def hello():\\n    return "hello"\\n' > hello.py
printf 'import hello\\n\\ndef test_hello():\\n    assert hello.hello()\\n' > tests/test_hello.py
git add hello.py tests/test_hello.py
git commit -q -m "raw $1"
git checkout -q main
"""


def git(repo: Path, *args: str) -> None:
    subprocess.run(["git", "-C", str(repo), *args], check=True, capture_output=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=int, default=7)
    parser.add_argument("--smoke", action="store_true", help="one quick iteration (CI); fails on any error")
    args = parser.parse_args()
    compile_bytecode()  # as an installed snodo has it (see _common.compile_bytecode)
    if args.smoke:
        args.runs = 1
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        repo = root / "repo"
        repo.mkdir()
        git(repo, "init", "-q", "-b", "main")
        git(repo, "config", "user.email", "b@example.com")
        git(repo, "config", "user.name", "bench")
        (repo / ".snodo").mkdir()
        (repo / ".snodo" / "protocol.yml").write_text(PROTOCOL)
        (repo / "README.md").write_text("bench\n")
        git(repo, "add", "-A")
        git(repo, "commit", "-q", "-m", "init")
        env = {**os.environ, "SNODO_HOME": str(root / "home"), "LITELLM_LOCAL_MODEL_COST_MAP": "True"}
        raw_script = root / "raw.sh"
        raw_script.write_text(RAW)

        raw, governed, rss = [], [], []
        for i in range(args.runs):
            raw.append(run_measured(["bash", str(raw_script), str(i)], cwd=repo, env=env)[0])
            seconds, peak, code = run_measured(
                [sys.executable, "-I", "-m", "snodo", "run", f"add a hello module number {i}", "--json"],
                cwd=repo,
                env=env,
            )
            if code != 0:
                raise SystemExit(f"snodo run exited {code}; run it by hand in {repo} to see why")
            governed.append(seconds)
            rss.append(peak)
        print(summary("raw work (files + git commit)", raw))
        print(summary("snodo run --mock (validators: true)", governed))
        print(summary("peak RSS of snodo run", rss, "MiB"))
        overhead = statistics.median(governed) - statistics.median(raw)
        print(
            f"governance overhead: {overhead:.3f}s per run (target < 0.5s: {'met' if overhead < 0.5 else 'NOT met'}), "
            f"ratio {statistics.median(governed) / statistics.median(raw):.1f}x; "
            f"peak memory {statistics.median(rss):.1f} MiB (target < 80: "
            f"{'met' if statistics.median(rss) < 80 else 'NOT met'})"
        )


if __name__ == "__main__":
    main()
