"""run_tests against real pytest child processes: verdicts, summaries, timeouts, injection."""

from __future__ import annotations

import os
import sys
import tempfile
import time
from pathlib import Path

import pytest

from snodo.base.errors import PathValidationError, ToolError
from snodo.workspace import run_tests


@pytest.fixture
def suite(tmp_path: Path) -> Path:
    root = tmp_path / "suite"
    (root / "tests").mkdir(parents=True)
    (root / "tests/test_green.py").write_text("def test_one():\n    assert True\n")
    return root


def test_green(suite: Path) -> None:
    result = run_tests(suite)
    assert result.passed and result.exit_code == 0 and not result.timed_out
    assert result.summary.startswith("1 passed in ")
    assert "1 passed" in result.output_tail and result.duration > 0
    assert os.listdir(suite) == ["tests"]  # no cache, no bytecode left behind
    assert os.listdir(suite / "tests") == ["test_green.py"]


def test_red_and_a_single_path(suite: Path) -> None:
    (suite / "tests/test_red.py").write_text("def test_bad():\n    assert 1 == 2\n")
    result = run_tests(suite)
    assert not result.passed and result.exit_code == 1
    assert result.summary.startswith("1 failed, 1 passed in ")
    assert "assert 1 == 2" in result.output_tail
    only_green = run_tests(suite, "tests/test_green.py")
    assert only_green.passed and only_green.summary.startswith("1 passed")


def test_no_tests_collected_is_not_a_pass(tmp_path: Path) -> None:
    result = run_tests(tmp_path)
    assert result.exit_code == 5 and not result.passed
    assert result.summary == "no tests collected"


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as stat:
            return stat.read().rsplit(")", 1)[1].split()[0] != "Z"
    except FileNotFoundError:
        return False


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc")
def test_a_hung_suite_is_killed_with_its_children(suite: Path) -> None:
    pidfile = suite / "child.pid"
    (suite / "tests/test_hang.py").write_text(
        "import subprocess, sys\n"
        "def test_hang():\n"
        "    child = subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(600)'])\n"
        f"    open({str(pidfile)!r}, 'w').write(str(child.pid))\n"
        "    while True:\n"
        "        pass\n"
    )
    started = time.monotonic()
    result = run_tests(suite, timeout=3)
    assert time.monotonic() - started < 10
    assert result.timed_out and not result.passed and result.exit_code is None
    assert "timed out" in result.summary
    child = int(pidfile.read_text())
    deadline = time.monotonic() + 5
    while _alive(child) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not _alive(child)


@pytest.mark.parametrize("path", ["--collect-only", "-p evil", "-pevil", "--rootdir=/"])
def test_options_are_refused(suite: Path, path: str) -> None:
    with pytest.raises(ToolError, match="not an option"):
        run_tests(suite, path)


@pytest.mark.parametrize("path", ["../outside", "/etc", "tests/\x00x"])
def test_paths_outside_the_root_are_refused(suite: Path, path: str) -> None:
    with pytest.raises(PathValidationError):
        run_tests(suite, path)


def test_a_custom_command_and_bad_arguments(suite: Path) -> None:
    custom = run_tests(suite, command=[sys.executable, "-c", "print('== 2 passed, 1 skipped in 0.01s ==')"])
    assert custom.passed and custom.summary == "exit code 0"  # printed text is never read as pytest's tally
    failing = run_tests(suite, command=[sys.executable, "-c", "raise SystemExit(3)"])
    assert not failing.passed and failing.summary == "exit code 3"
    for bad in ("pytest -q", [], [sys.executable, ""]):
        with pytest.raises(ToolError, match="test command"):
            run_tests(suite, command=bad)
    with pytest.raises(ToolError, match="positive"):
        run_tests(suite, timeout=0)
    with pytest.raises(ToolError, match="not a directory"):
        run_tests(suite / "missing")


def test_the_import_reports_share_one_private_directory_and_leave_nothing_in_it(
    suite: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The probe's report of each run is a file of its own in one directory per process
    (no directory made and removed per run), read and then removed."""
    from snodo.workspace import testrun

    monkeypatch.setenv("TMPDIR", str(tmp_path / "tmp"))
    (tmp_path / "tmp").mkdir()
    monkeypatch.setattr(tempfile, "tempdir", None)  # TMPDIR is read again
    monkeypatch.setattr(testrun, "_SCRATCH", {})
    for _ in range(2):
        run = testrun.run_python_tests(suite, ["python", "-m", "pytest", "-q"], timeout=120)
        assert run.exit_code == 0 and run.imports is not None  # the probe reported
    made = list((tmp_path / "tmp").iterdir())
    assert len(made) == 1 and made[0].name.startswith("snodo-tests-")
    assert made[0].stat().st_mode & 0o777 == 0o700 and list(made[0].iterdir()) == []
    # a forked child makes its own, and the parent's exit handler spares the child's
    child = os.fork()
    if child == 0:  # pragma: no cover - the child's result is its exit status
        os._exit(0 if testrun._report_path().parent != made[0] else 1)
    assert os.waitstatus_to_exitcode(os.waitpid(child, 0)[1]) == 0
