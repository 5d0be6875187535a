"""run_tests against real pytest child processes: verdicts, summaries, timeouts, injection."""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path

import pytest

from snodo.base.errors import PathValidationError, ToolError
from snodo.judging.testrun import run_tests


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


def test_bad_arguments(suite: Path) -> None:
    with pytest.raises(ToolError, match="positive"):
        run_tests(suite, timeout=0)
    with pytest.raises(ToolError, match="not a directory"):
        run_tests(suite / "missing")


def test_a_run_that_ends_before_pytest_returns_is_not_a_pass(suite: Path) -> None:
    """Exit status 0 proves nothing: a test that ends the process leaves its record unfinished."""
    (suite / "tests/test_exit.py").write_text("import os\n\ndef test_exit():\n    os._exit(0)\n")
    result = run_tests(suite)
    assert result.exit_code == 0 and not result.passed
    assert "did not report honestly" in result.summary
