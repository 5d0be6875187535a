"""The pytest a governed run starts ahead of its post_execute tests (snodo/workspace/warmtests.py).

Real runs through the command line, real bubblewrap and Landlock, real pytest: the
project's own ``conftest.py`` reports how its pytest was started (``python -c``: started
ahead; ``python -m pytest``: the usual way) and what it could reach, in the validator's
output. Started ahead, it is confined exactly as a fresh start is; anything that differs
from what a fresh start would be, and Landlock, start the tests the usual way.
"""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from snodo.proc import live_processes
from snodo.sandbox import SandboxPolicy, confined
from snodo.workspace import testrun, warmtests
from snodo.workspace.pysetup import python_argv, python_setup
from tests.conftest import CliResult, git, make_repo, write_producer_protocol

#: Reports, after the tests, how this pytest was started and what it could reach.
CONFTEST = """\
import os, sys


def pytest_terminal_summary(terminalreporter):
    home = os.environ.get("SNODO_CHECK_HOME", "")
    try:
        open(os.path.join(".snodo", "planted"), "w").close()
        governance = "writable"
    except OSError:
        governance = "read-only"
    try:
        seen = bool(home) and bool(os.listdir(os.path.join(home, "keys")))
    except OSError:
        seen = False
    where = [p for p in sys.path if p in ("", os.getcwd())]
    terminalreporter.write_line(
        f"STARTED {sys.orig_argv[1]} HOME-SEEN {seen} GOVERNANCE {governance} PATH {sys.path.index(where[0]) if where else -1} {sys.argv[0].endswith('__main__.py')}"
        f" ROOTS {sys.path.index(os.environ['SNODO_IMPORT_WORKSPACE'])} {os.environ.get('PYTHONPATH', '').count(os.pathsep)}"
        f" CUSTOMIZED {os.environ.get('SNODO_CUSTOMIZED', '-')}"
    )
    terminalreporter.write_line(f"MODULES {os.environ.get('SNODO_PROJECT_MODULES')}")
"""


def _project(tmp_path: Path) -> Path:
    repo = make_repo(tmp_path / "repo")
    write_producer_protocol(repo, tail="execution:\n  env: [SNODO_CHECK_HOME]\n")
    (repo / "conftest.py").write_text(CONFTEST)
    git(repo, "add", "-A")
    git(repo, "commit", "-qm", "project")
    return repo


def _run(snodo_cli: Callable[..., CliResult], repo: Path, home: Path, spec: str) -> dict[str, Any]:
    run = snodo_cli("run", spec, "--mock", "--json", cwd=repo, env={"SNODO_CHECK_HOME": str(home)})
    assert run.returncode == 0, run
    result: dict[str, Any] = json.loads(run.stdout)
    assert result["status"] == "completed", result
    return result


def _started(result: dict[str, Any]) -> str:
    (tests,) = [v for v in result["validators"] if v["validator_id"] == "tests"]
    assert tests["severity"] == "pass" and tests["details"]["imports_checked"], tests
    (line,) = [line for line in tests["details"]["output_tail"].splitlines() if line.startswith("STARTED ")]
    return line


def test_the_second_run_takes_a_pytest_started_ahead_confined_as_a_fresh_one(
    tmp_path: Path, snodo_home: Path, snodo_cli: Callable[..., CliResult], backend: str
) -> None:
    repo = _project(tmp_path)
    first = _started(_run(snodo_cli, repo, snodo_home, "add a hello module"))
    assert first.startswith("STARTED -m HOME-SEEN False GOVERNANCE read-only PATH "), first
    second = _started(_run(snodo_cli, repo, snodo_home, "add a hello module"))
    started = "-c" if backend == "bwrap" else "-m"  # Landlock's rules are fixed at a process's start
    assert second == first.replace("STARTED -m", f"STARTED {started}"), (first, second)  # the same sys.path too


def _modules(result: dict[str, Any]) -> str:
    (tests,) = [v for v in result["validators"] if v["validator_id"] == "tests"]
    (line,) = [line for line in tests["details"]["output_tail"].splitlines() if line.startswith("MODULES ")]
    return line


def test_what_only_pytest_reads_is_sent_with_the_go(
    tmp_path: Path, snodo_home: Path, snodo_cli: Callable[..., CliResult], backend: str
) -> None:
    """The coder adds another module: the project's module list in the tests' environment
    differs from the last run's. Nothing reads it before pytest runs, so the process
    started ahead (without it) is still exactly a fresh start, and gets it with the go."""
    repo = _project(tmp_path)
    # named as modules pytest imports, but no module: a fresh start imports pytest's own
    (repo / "logging.conf").write_text("[loggers]\n")
    (repo / "html").mkdir()
    (repo / "html" / "index.html").write_text("<p>hello</p>\n")
    git(repo, "add", "-A")
    git(repo, "commit", "-qm", "files named like modules")
    _run(snodo_cli, repo, snodo_home, "add a hello module")
    other = _run(snodo_cli, repo, snodo_home, "add a greeting module")
    started = "-c" if backend == "bwrap" else "-m"
    assert _started(other).startswith(f"STARTED {started} "), _started(other)
    assert "greeting" in _modules(other).split(" ", 1)[1].split(","), _modules(other)


SITECUSTOMIZE = "import os\nos.environ['SNODO_CUSTOMIZED'] = '1'\n"


def test_a_workspace_module_a_fresh_start_would_run_first_starts_the_tests_the_usual_way(
    tmp_path: Path, snodo_home: Path, snodo_cli: Callable[..., CliResult], backend: str
) -> None:
    """The coder writes a ``sitecustomize.py`` at an import root: a fresh interpreter runs it
    at start-up, before pytest. The process started ahead did not (it started without the
    workspace's roots), so at the go it sees the name there and steps aside: the tests
    start the usual way and the file runs, as it would anywhere else."""
    repo = _project(tmp_path)
    _run(snodo_cli, repo, snodo_home, "add a hello module")  # remembered: the next run starts one ahead
    files = {"sitecustomize.py": SITECUSTOMIZE, "tests/test_two.py": "def test_two():\n    assert True\n"}
    write_producer_protocol(
        repo, coder_config=json.dumps({"files": files}), tail="execution:\n  env: [SNODO_CHECK_HOME]\n"
    )
    git(repo, "commit", "-qam", "the coder writes a sitecustomize")
    line = _started(_run(snodo_cli, repo, snodo_home, "add a customised start"))
    assert line.startswith("STARTED -m ") and line.endswith(" CUSTOMIZED 1"), line
    assert not [a for a in live_processes() if "-c" in a]


def _workspace(tmp_path: Path) -> Path:
    ws = tmp_path / "ws"
    (ws / "tests").mkdir(parents=True)
    (ws / "tests" / "test_one.py").write_text("def test_one():\n    assert True\n")
    (ws / "conftest.py").write_text(CONFTEST)
    (ws / ".snodo").mkdir()
    return ws


def test_started_ahead_only_for_the_same_run_and_killed_when_not_taken(tmp_path: Path, snodo_home: Path) -> None:
    ws = _workspace(tmp_path)
    policy = SandboxPolicy(workspace=ws)
    setup = python_setup(ws, python=sys.executable)
    argv = python_argv(["python", "-m", "pytest", "-q"], setup)
    fields = testrun.setup_fields(setup)
    with confined(policy):
        cold = testrun.run_suite(argv, setup, timeout=60)  # the usual way; remembered
    assert cold.exit_code == 0 and "STARTED -m" in cold.output, cold.output
    from snodo.sandbox import choose_backend

    if choose_backend().name != "bwrap":
        assert not warmtests.prestart(ws, policy)
        return
    # another policy (a protected path more): not the same confinement, killed
    assert warmtests.prestart(ws, policy)
    env = testrun.suite_env(fields, "/nowhere")
    stricter = SandboxPolicy(workspace=ws, read_only=("tests/**",))
    assert warmtests.take(argv, ws, env, stricter) is None
    assert not [a for a in live_processes() if "-c" in a]
    # another argument list of pytest is still pytest: taken, and run with those arguments
    assert warmtests.prestart(ws, policy)
    with confined(policy):
        warm = testrun.run_suite([*argv, "-k", "nothing_matches"], setup, timeout=60)
    assert warm.exit_code == testrun.NO_TESTS_COLLECTED and "STARTED -c" in warm.output, warm.output
    # not taken at all: discarded with the run
    assert warmtests.prestart(ws, policy)
    assert [a for a in live_processes() if "-c" in a]
    warmtests.discard(ws)
    assert not [a for a in live_processes() if "-c" in a]
    assert not os.path.exists(ws / ".snodo" / "planted")


def test_not_taken_when_the_host_replaced_a_protected_file_since_it_started(tmp_path: Path, snodo_home: Path) -> None:
    """Its mount of the protected file holds the old one: the new one would be writable."""
    from snodo.sandbox import choose_backend

    ws = _workspace(tmp_path)
    (ws / "poetry.lock").write_text("old\n")
    git(ws, "init", "-q")
    git(ws, "add", "-A")
    policy = SandboxPolicy(workspace=ws, read_only=("*.lock",))
    setup = python_setup(ws, python=sys.executable)
    argv = python_argv(["python", "-m", "pytest", "-q"], setup)
    with confined(policy):
        testrun.run_suite(argv, setup, timeout=60)  # remembered
    if choose_backend().name != "bwrap":
        pytest.skip("started ahead only where bubblewrap confines")
    assert warmtests.prestart(ws, policy)
    (ws / "poetry.lock.new").write_text("new\n")
    os.replace(ws / "poetry.lock.new", ws / "poetry.lock")
    env = testrun.suite_env(testrun.setup_fields(setup), "/nowhere")
    assert warmtests.take(argv, ws, env, policy) is None
    assert not [a for a in live_processes() if "-c" in a]


def _waiting(ws: Path) -> object:
    with warmtests._LOCK:
        warm = warmtests._WAITING.get(os.path.realpath(ws))
    return None if warm is None else warm.started


def test_started_early_runs_nothing_of_the_tree_and_is_kept_only_for_the_same_confinement(
    tmp_path: Path, snodo_home: Path
) -> None:
    """``snodo run`` starts the last run's pytest before the working copy is restored, when
    the tree may still hold what the last agent left. Nothing of it runs before the go (a
    ``sitecustomize.py`` left at an import root would run at a fresh interpreter's start-up);
    the engine keeps that process for a run confined the same way, else starts another."""
    from snodo.sandbox import choose_backend

    ws = _workspace(tmp_path)
    checkout = tmp_path / "checkout"  # the project the working copy ``ws`` was made from
    checkout.mkdir()
    policy = SandboxPolicy(workspace=ws)
    setup = python_setup(ws, project_root=checkout, python=sys.executable)
    argv = python_argv(["python", "-m", "pytest", "-q"], setup)
    with confined(policy):
        testrun.run_suite(argv, setup, timeout=60)  # the usual way; remembered with its policy
    if choose_backend().name != "bwrap":
        assert not warmtests.prestart_for(checkout)
        return
    # tests run in a checkout itself (the MCP ``run_tests`` tool) leave nothing to start early
    mcp_setup = python_setup(checkout, python=sys.executable)
    with confined(SandboxPolicy(workspace=checkout)):
        testrun.run_suite(python_argv(["python", "-m", "pytest", "-q", "--co"], mcp_setup), mcp_setup, timeout=60)
    assert warmtests.prestart_for(checkout) and _waiting(ws) is not None and _waiting(checkout) is None
    warmtests.discard()
    # What the last agent left at an import root, which a fresh interpreter runs at start-up:
    # the process started now never does (it starts without the workspace's roots) and,
    # seeing it there at the go, steps aside; the tests start the usual way and run it.
    left = "import pathlib, sys\npathlib.Path('ran' + sys.orig_argv[1]).write_text('x')\n"
    (ws / "sitecustomize.py").write_text(left)
    assert warmtests.prestart_for(checkout)
    early = _waiting(ws)
    assert warmtests.prestart(ws, policy) and _waiting(ws) is early  # the same confinement: kept
    with confined(policy):
        stepped_aside = testrun.run_suite(argv, setup, timeout=60)
    assert stepped_aside.exit_code == 0 and "STARTED -m" in stepped_aside.output, stepped_aside.output
    assert (ws / "ran-m").exists() and not (ws / "ran-c").exists()
    # the restore removed it: the process started early is the one that runs the tests
    (ws / "sitecustomize.py").unlink()
    (ws / "ran-m").unlink()
    assert warmtests.prestart_for(checkout)
    early = _waiting(ws)
    assert warmtests.prestart(ws, policy) and _waiting(ws) is early
    with confined(policy):
        warm = testrun.run_suite(argv, setup, timeout=60)
    assert warm.exit_code == 0 and "STARTED -c" in warm.output, warm.output
    assert not (ws / "ran-m").exists() and not (ws / "ran-c").exists()
    # recorded under one policy, this run under another: that one is killed, a new one waits
    git(ws, "init", "-q")  # protected paths are matched through git's index
    git(ws, "add", "-A")
    assert warmtests.prestart_for(checkout)
    early = _waiting(ws)
    stricter = SandboxPolicy(workspace=ws, read_only=("tests/**",))
    assert warmtests.prestart(ws, stricter)
    assert _waiting(ws) is not early and early is not None and not early.running()  # type: ignore[attr-defined]
    warmtests.discard(ws)
    assert not [a for a in live_processes() if "-c" in a]


def test_a_module_of_the_workspace_named_as_one_imported_ahead_starts_the_tests_the_usual_way(
    tmp_path: Path, snodo_home: Path
) -> None:
    """A fresh start searches the working directory before the environment, so a project's
    ``calendar.py`` is the ``calendar`` its tests get (the standard library's was imported
    ahead, with pytest): the process started ahead steps aside and the tests see the
    project's module, as they would anywhere else."""
    from snodo.sandbox import choose_backend

    ws = _workspace(tmp_path)
    (ws / "tests" / "test_calendar.py").write_text(
        "import calendar\n\n\ndef test_which():\n    print('CALENDAR', getattr(calendar, 'OURS', False))\n"
    )
    policy = SandboxPolicy(workspace=ws)
    setup = python_setup(ws, python=sys.executable)
    argv = python_argv(["python", "-m", "pytest", "-q", "-s"], setup)
    with confined(policy):
        testrun.run_suite(argv, setup, timeout=60)  # the usual way; remembered
    if choose_backend().name != "bwrap":
        pytest.skip("started ahead only where bubblewrap confines")
    assert warmtests.prestart(ws, policy)
    (ws / "calendar.py").write_text("OURS = True\n")  # what the coder wrote
    with confined(policy):
        run = testrun.run_suite(argv, setup, timeout=60)
    assert run.exit_code == 0 and "STARTED -m" in run.output and "CALENDAR True" in run.output, run.output
    assert not [a for a in live_processes() if "-c" in a]


def test_the_recorded_policy_is_the_policy_field_for_field(tmp_path: Path) -> None:
    """What an early start is confined by comes back from the record; every field that
    takes part in the policy's equality is kept (a field added later and not recorded would
    make every early start differ from the run's policy, and go unused)."""
    import attrs

    from snodo.sandbox.policy import Limits

    policy = SandboxPolicy(
        workspace=tmp_path / "ws",
        read_only=("**/secrets/**", "*.lock"),
        network=True,
        hidden=(tmp_path / "hidden",),
        writable=(tmp_path / "state",),
        env=("SNODO_CHECK_HOME",),
        limits=Limits(file_size=1 << 20, processes=64, memory=1 << 30),
        interpreters=(tmp_path / ".venv",),
        mode="off",
    )
    record = warmtests.policy_record(policy)
    assert {f.name for f in attrs.fields(SandboxPolicy) if f.eq} == set(record)
    assert warmtests.policy_from(json.loads(json.dumps(record))) == policy
    with pytest.raises(ValueError):
        warmtests.policy_from({**record, "mode": "sometimes"})


BROKEN_STDOUT = """\
import sys


class _Broken:
    def write(self, text):
        return len(text)

    def flush(self):
        raise OSError("no room")


def pytest_unconfigure(config):  # once pytest is done with its own streams
    import atexit

    atexit.register(setattr, sys, "stdout", _Broken())
"""


def test_an_output_that_cannot_be_flushed_ends_it_as_any_interpreter_ends(tmp_path: Path, snodo_home: Path) -> None:
    """The process started ahead ends without the interpreter's teardown only when that
    changes nothing a caller sees: a ``sys.stdout`` whose flush fails makes any interpreter
    exit 120, and the one started ahead then exits the usual way, with the same status."""
    from snodo.sandbox import choose_backend

    ws = _workspace(tmp_path)
    (ws / "conftest.py").write_text(CONFTEST + "\n" + BROKEN_STDOUT)
    policy = SandboxPolicy(workspace=ws)
    setup = python_setup(ws, python=sys.executable)
    argv = python_argv(["python", "-m", "pytest", "-q"], setup)
    with confined(policy):
        cold = testrun.run_suite(argv, setup, timeout=60)  # the usual way; remembered
    assert cold.exit_code == 120 and "STARTED -m" in cold.output, cold.output
    if choose_backend().name != "bwrap":
        pytest.skip("started ahead only where bubblewrap confines")
    assert warmtests.prestart(ws, policy)
    with confined(policy):
        warm = testrun.run_suite(argv, setup, timeout=60)
    assert warm.exit_code == 120 and "STARTED -c" in warm.output, warm.output
