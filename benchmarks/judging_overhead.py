"""What judging a change by its tests costs, side by side with running them by hand.

A generated library of ``--tests`` tests (default 320, over 20 modules) in a git
repository, a base commit and an honest one-function change on top. Measured in one
process, alternating:

- **plain**: ``python -m pytest -q -p no:cacheprovider`` in the checkout, once; and the
  same with ``PYTEST_DISABLE_PLUGIN_AUTOLOAD=1`` (the plugins the judge loads: only what the
  configuration names), the fairer floor where the environment has many pytest plugins;
- **judged (cached)**: the pytest validator's judge (:class:`snodo.judging.judge.Judge`),
  confined as a validator is, with the base's results already cached: one run of the
  base's tests against the change, in a copy written from git's objects;
- **judged (first)**: the same with an empty cache (the base's tests run too), reported once;
- **governed run / by hand**: ``snodo run --mock`` with the ``team`` template's validators
  (the mock coder writing the same change) against doing it by hand: write the file, run
  the tests once, commit.

Targets (issue: judging bound to the work): judged (cached) / plain ≤ 1.3; governed run /
by hand ≤ 1.3.

    python benchmarks/judging_overhead.py [--runs 5] [--tests 320] [--smoke]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from _common import run_measured, summary, warm_pytest_rewrite_cache

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")

MODULE = """\
def f{i}_{j}(x):
    return x * {j} + {i}
"""
TEST = """\
import pytest
from lib.mod{i} import f{i}_{j}


@pytest.mark.parametrize("x", [0, 1])
def test_f{i}_{j}(x):
    assert f{i}_{j}(x) == x * {j} + {i}
"""
PROTOCOL = """\
protocol_id: bench
name: bench
disagreement_policy: majority
modes:
  - mode_id: producer
    tools: [read, edit, test, validate, dispatch, commit]
    validators: [scope, criteria, tests, acceptance]
    coder: mock
    coder_config: {coder_config}
validators:
  - {{validator_id: scope, validator_type: protocol, evaluation_phase: pre_execute}}
  - {{validator_id: criteria, validator_type: acceptance, evaluation_phase: pre_execute, severity_cap: warn}}
  - {{validator_id: tests, validator_type: pytest, evaluation_phase: post_execute,
      tooling: {{command: "python -m pytest -q", timeout: 300}}}}
  - {{validator_id: acceptance, validator_type: acceptance, evaluation_phase: post_execute}}
"""
CHANGED = "src/lib/mod0.py"


def git(repo: Path, *args: str) -> str:
    return subprocess.run(["git", "-C", str(repo), *args], check=True, capture_output=True, text=True).stdout


def make_library(root: Path, tests: int) -> str:
    """The library and its tests (two cases per test function), committed; returns the base commit."""
    functions = max(1, tests // 2)
    modules = 20 if functions >= 20 else functions
    per = max(1, functions // modules)
    (root / "src" / "lib").mkdir(parents=True)
    (root / "tests").mkdir()
    (root / "src" / "lib" / "__init__.py").write_text("")
    for i in range(modules):
        (root / "src" / "lib" / f"mod{i}.py").write_text("\n\n".join(MODULE.format(i=i, j=j) for j in range(per)))
        (root / "tests" / f"test_mod{i}.py").write_text("\n\n".join(TEST.format(i=i, j=j) for j in range(per)))
    (root / "pyproject.toml").write_text(
        '[project]\nname = "lib"\nversion = "0"\n\n[tool.pytest.ini_options]\ntestpaths = ["tests"]\n'
        'pythonpath = ["src"]\n'
    )
    (root / ".gitignore").write_text("__pycache__/\n")
    git(root, "init", "-q", "-b", "main")
    git(root, "config", "user.email", "bench@example.com")
    git(root, "config", "user.name", "bench")
    git(root, "add", "-A")
    git(root, "commit", "-q", "-m", "base")
    return git(root, "rev-parse", "HEAD").strip()


def changed_text(root: Path) -> str:
    return (root / CHANGED).read_text() + "\n\ndef added(x):\n    return x\n"


def judge_once(root: Path, base: str, cache: Path) -> tuple[float, str]:
    from snodo.governance.service import Project
    from snodo.judging.judge import Judge, Options
    from snodo.plugin.host import get_plugin_manager
    from snodo.protocol import load_protocol
    from snodo.sandbox import confined

    host = get_plugin_manager()
    project = Project(load_protocol(root / ".snodo" / "protocol.yml", host), host, home=cache.parent)
    tree = git(root, "rev-parse", "HEAD^{tree}").strip()
    started = time.perf_counter()
    with confined(project.sandbox_policy(root)):
        judge = Judge(root, base=base, tree=tree, project_root=root, options=Options(), spec="x", cache=cache)
        try:
            verdict = judge.judge()
        finally:
            judge.close()
    return time.perf_counter() - started, verdict.severity


def by_hand(root: Path, text: str) -> float:
    started = time.perf_counter()
    (root / CHANGED).write_text(text)
    subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider"],
        cwd=root,
        check=True,
        stdout=subprocess.DEVNULL,
    )
    git(root, "commit", "-q", "-am", "by hand")
    elapsed = time.perf_counter() - started
    git(root, "reset", "-q", "--hard", "HEAD~1")
    return elapsed


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--tests", type=int, default=320)
    parser.add_argument("--smoke", action="store_true", help="one quick iteration on a small suite (CI)")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    if args.smoke:
        args.runs, args.tests = 1, 40
    warm_pytest_rewrite_cache(sys.executable)
    work = Path(tempfile.mkdtemp(prefix="snodo-bench-judging-"))
    home = work / "home"
    os.environ["SNODO_HOME"] = str(home)
    try:
        root = work / "repo"
        root.mkdir()
        base = make_library(root, args.tests)
        text = changed_text(root)
        (root / ".snodo").mkdir()
        config = json.dumps({"files": {CHANGED: text}})
        (root / ".snodo" / "protocol.yml").write_text(PROTOCOL.format(coder_config=config))
        git(root, "add", "-A")
        git(root, "commit", "-q", "-m", "protocol")
        base = git(root, "rev-parse", "HEAD").strip()
        # the change, committed on a side branch the judge reads from the object store
        (root / CHANGED).write_text(text)
        git(root, "commit", "-q", "-am", "change")
        cache = home / "judging"
        first, severity = judge_once(root, base, cache)
        assert severity == "pass", severity
        plain: list[float] = []
        bare: list[float] = []
        judged: list[float] = []
        pytest_argv = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider"]
        no_autoload = {**os.environ, "PYTEST_DISABLE_PLUGIN_AUTOLOAD": "1"}
        for _ in range(args.runs):
            seconds, _rss, code = run_measured(pytest_argv, cwd=root)
            assert code == 0, code
            plain.append(seconds)
            seconds, _rss, code = run_measured(pytest_argv, cwd=root, env=no_autoload)
            assert code == 0, code
            bare.append(seconds)
            seconds, severity = judge_once(root, base, cache)
            assert severity == "pass", severity
            judged.append(seconds)
        git(root, "reset", "-q", "--hard", "HEAD~1")
        governed: list[float] = []
        hand: list[float] = []
        cli = [sys.executable, "-m", "snodo", "-q", "run", "add a function", "--json"]
        for _ in range(args.runs):
            seconds, _rss, code = run_measured(cli, cwd=root)
            assert code == 0, f"the governed run exited {code}"
            governed.append(seconds)
            hand.append(by_hand(root, text))
        ratio_judge = statistics.median(judged) / statistics.median(plain)
        ratio_bare = statistics.median(judged) / statistics.median(bare)
        ratio_run = statistics.median(governed) / statistics.median(hand)
        report = {
            "tests": args.tests,
            "plain_s": statistics.median(plain),
            "judged_cached_s": statistics.median(judged),
            "judged_first_s": first,
            "plain_no_autoload_s": statistics.median(bare),
            "judged_over_plain": ratio_judge,
            "judged_over_plain_no_autoload": ratio_bare,
            "governed_s": statistics.median(governed),
            "by_hand_s": statistics.median(hand),
            "governed_over_by_hand": ratio_run,
        }
        if args.json:
            print(json.dumps(report, indent=2))
        else:
            print(summary(f"plain pytest ({args.tests} tests)", plain))
            print(summary("plain pytest, plugin autoload off", bare))
            print(summary("judged, base cached", judged))
            print(f"{'judged, first (base run too)':<34} {first:8.3f}s")
            print(summary("governed run (snodo run --mock)", governed))
            print(summary("by hand (write, pytest, commit)", hand))
            print(f"judged / plain: x{ratio_judge:.2f} (target <= 1.3); / plain, autoload off: x{ratio_bare:.2f}")
            print(f"governed / by hand: x{ratio_run:.2f} (target <= 1.3)")
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
