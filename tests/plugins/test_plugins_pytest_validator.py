"""The pytest validator on real tiny projects, through the plugin host's dispatch."""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path

import pytest

from snodo.api import EnvironmentProblem, ValidationRequest, ValidatorFault, Verdict
from snodo.plugins import PluginHost

GREEN = {
    "calc.py": "def add(a, b):\n    return a + b\n",
    "tests/test_calc.py": "import calc\n\n\ndef test_add():\n    assert calc.add(1, 2) == 3\n",
}
RED = {
    **GREEN,
    "tests/test_more.py": "import calc\n\n\ndef test_wrong_sum():\n    assert calc.add(2, 2) == 5\n",
}

Request = Callable[..., ValidationRequest]


def judge(host: PluginHost, request: ValidationRequest) -> Verdict:
    verdict = host.validate(request)
    assert verdict is not None
    return verdict


def test_green_suite_passes_with_the_summary_line(
    host: PluginHost, project: Callable[..., Path], vrequest: Request, snapshot: Callable[[Path], object]
) -> None:
    root = project(GREEN, git=True)
    before = snapshot(root)
    verdict = judge(host, vrequest(root, "pytest"))
    assert verdict.severity == "pass"
    assert "1 passed" in verdict.justification
    assert verdict.details["exit_code"] == 0
    assert "dirty_tree" not in verdict.details
    assert snapshot(root) == before


def test_red_suite_is_a_blocker_with_the_failure(
    host: PluginHost, project: Callable[..., Path], vrequest: Request, snapshot: Callable[[Path], object]
) -> None:
    root = project(RED, git=True)
    before = snapshot(root)
    verdict = judge(host, vrequest(root, "pytest"))
    assert verdict.severity == "blocker"
    assert "1 failed, 1 passed" in verdict.justification
    assert "test_wrong_sum" in verdict.details["output_tail"]
    assert snapshot(root) == before


def test_no_tests_collected_is_a_warn_never_a_pass(
    host: PluginHost, project: Callable[..., Path], vrequest: Request
) -> None:
    verdict = judge(host, vrequest(project({"calc.py": GREEN["calc.py"]}), "pytest"))
    assert verdict.severity == "warn"
    assert "no tests collected" in verdict.justification
    assert "passed" not in verdict.justification


def test_syntax_error_in_a_test_file_is_a_blocker(
    host: PluginHost, project: Callable[..., Path], vrequest: Request
) -> None:
    root = project({**GREEN, "tests/test_broken.py": "def test_x(:\n    pass\n"})
    verdict = judge(host, vrequest(root, "pytest"))
    assert verdict.severity == "blocker"
    assert verdict.details["exit_code"] == 2
    assert "test_broken.py" in verdict.details["output_tail"]


def test_infinite_loop_is_killed_and_raises(
    host: PluginHost,
    project: Callable[..., Path],
    tmp_path: Path,
    vrequest: Request,
    is_alive: Callable[[int], bool],
) -> None:
    pid_file = tmp_path / "looping.pid"
    loop = (
        f"import os\n\n\ndef test_forever():\n    open({str(pid_file)!r}, 'w').write(str(os.getpid()))\n"
        "    while True:\n        pass\n"
    )
    root = project({"tests/test_loop.py": loop})
    started = time.monotonic()
    with pytest.raises(ValidatorFault, match="timed out after 2s"):
        host.validate(vrequest(root, "pytest", tooling={"timeout": 2}))
    assert time.monotonic() - started < 10
    pid = int(pid_file.read_text())
    deadline = time.monotonic() + 5
    while is_alive(pid) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not is_alive(pid), "the looping pytest process survived the timeout"


def test_missing_program_raises(host: PluginHost, project: Callable[..., Path], vrequest: Request) -> None:
    with pytest.raises(EnvironmentProblem, match="snodo-no-such-test-runner"):
        host.validate(vrequest(project(GREEN), "pytest", tooling={"command": "snodo-no-such-test-runner -q"}))


def test_usage_error_raises(host: PluginHost, project: Callable[..., Path], vrequest: Request) -> None:
    with pytest.raises(ValidatorFault, match=r"usage or conftest error\) \(exit code 4\)"):
        host.validate(vrequest(project(GREEN), "pytest", tooling={"command": "python -m pytest --no-such-flag"}))


@pytest.mark.parametrize(
    "command",
    ["python -m pytest -q && touch pwned", "python -m pytest | tee log", "python -m pytest $(echo -q)"],
)
def test_shell_syntax_is_refused_not_run(
    host: PluginHost, project: Callable[..., Path], vrequest: Request, command: str
) -> None:
    root = project(GREEN)
    with pytest.raises(ValidatorFault, match="without a shell"):
        host.validate(vrequest(root, "pytest", tooling={"command": command}))
    assert not (root / "pwned").exists()


def test_list_command_and_unknown_tooling(host: PluginHost, project: Callable[..., Path], vrequest: Request) -> None:
    root = project(GREEN)
    verdict = judge(host, vrequest(root, "pytest", tooling={"command": ["python", "-m", "pytest", "tests"]}))
    assert verdict.severity == "pass"
    with pytest.raises(ValidatorFault, match=r"unknown tooling key.*comand"):
        host.validate(vrequest(root, "pytest", tooling={"comand": "pytest"}))


def test_dirty_tree_is_reported(host: PluginHost, project: Callable[..., Path], vrequest: Request) -> None:
    root = project(GREEN, git=True)
    (root / "scratch.txt").write_text("uncommitted\n")
    verdict = judge(host, vrequest(root, "pytest"))
    assert verdict.severity == "pass"
    assert verdict.details["dirty_tree"] == ["?? scratch.txt"]


def test_an_interpreter_without_pytest_is_an_error_not_a_failing_suite(
    host: PluginHost, project: Callable[..., Path], vrequest: Request, tmp_path: Path
) -> None:
    """`python -m pytest` exits 1 when pytest is missing: that must not read as failing tests."""
    import subprocess
    import sys

    bare = tmp_path / "bare"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(bare)], check=True)
    root = project(GREEN)
    with pytest.raises(ValidatorFault) as info:
        host.validate(vrequest(root, "pytest", tooling={"python": str(bare / "bin" / "python")}))
    assert "No module named pytest" in str(info.value)
    assert "tooling.python" in str(info.value)
