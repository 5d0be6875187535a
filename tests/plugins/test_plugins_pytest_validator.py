"""The pytest validator on real tiny projects, through the plugin host's dispatch."""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path

import pytest

from snodo.api import ValidationRequest, ValidatorFault, Verdict
from snodo.plugin.host import PluginHost
from snodo.testing import run_validator

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
    assert "tests/test_broken.py: could not be collected" in verdict.justification
    assert "SyntaxError" in verdict.details["output_excerpt"]


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
    # 6 s: on a loaded machine pytest needs a few seconds to reach the test at all.
    with pytest.raises(ValidatorFault, match="did not finish within 6 s"):
        host.validate(vrequest(root, "pytest", tooling={"timeout": 6}))
    assert time.monotonic() - started < 15
    pid = int(pid_file.read_text())
    deadline = time.monotonic() + 5
    while is_alive(pid) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not is_alive(pid), "the looping pytest process survived the timeout"


def test_missing_interpreter_raises(host: PluginHost, project: Callable[..., Path], vrequest: Request) -> None:
    with pytest.raises(ValidatorFault, match="snodo-no-such-python"):
        host.validate(vrequest(project(GREEN), "pytest", tooling={"python": "snodo-no-such-python"}))


def test_usage_error_raises(host: PluginHost, project: Callable[..., Path], vrequest: Request) -> None:
    with pytest.raises(
        ValidatorFault, match=r"could not start the run \(exit status 4: a usage or configuration error"
    ):
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
    """The runner reads the tree's state once for the phase (snodo's own git) and the
    validator reports it; a request built without the runner knows nothing of it."""
    root = project(GREEN, git=True)
    (root / "scratch.txt").write_text("uncommitted\n")
    result = run_validator(host, vrequest(root, "pytest"))
    assert result.severity == "pass", result.justification
    assert result.details["dirty_tree"] == ["?? scratch.txt"]
    assert "dirty_tree" not in judge(host, vrequest(root, "pytest")).details


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


# ------------------------------------------- the tests judge the workspace's code (issue 11)


def test_a_failing_run_names_its_tests_and_carries_their_output(
    host: PluginHost, project: Callable[..., Path], vrequest: Request
) -> None:
    root = project(RED)
    verdict = judge(host, vrequest(root, "pytest"))
    assert verdict.severity == "blocker"
    assert "tests/test_more.py::test_wrong_sum (failed)" in verdict.justification
    assert verdict.details["failed_tests"] == ["tests/test_more.py::test_wrong_sum"]
    assert "assert 4 == 5" in verdict.details["output_excerpt"]
    assert len(verdict.details["output_excerpt"]) <= 4100


def test_a_command_that_is_not_pytest_is_never_a_pass(
    host: PluginHost, project: Callable[..., Path], vrequest: Request
) -> None:
    """An exit status alone proves nothing: `true` would pass anything."""
    root = project(GREEN)
    for command in ("true", "false", "make test"):
        with pytest.raises(ValidatorFault, match="does not run pytest"):
            host.validate(vrequest(root, "pytest", tooling={"command": command}))


def test_pytest_behind_a_wrapper_that_drops_the_environment_is_no_verdict(
    host: PluginHost, project: Callable[..., Path], vrequest: Request
) -> None:
    import sys

    root = project(GREEN)
    wrapper = [
        sys.executable,
        "-c",
        "import subprocess, sys; sys.exit(subprocess.call([sys.executable, '-m', 'pytest', '-q', "
        "'-p', 'no:cacheprovider'], env={'PYTHONDONTWRITEBYTECODE': '1'}))",
    ]
    with pytest.raises(ValidatorFault, match="does not run pytest"):
        host.validate(vrequest(root, "pytest", tooling={"command": wrapper}))


@pytest.mark.parametrize(
    ("conftest", "message"),
    [
        ("raise RuntimeError('conftest exploded')\n", "conftest"),
        ("import os\nos._exit(0)\n", "ended before pytest returned"),
        ("import os, signal\nos.kill(os.getpid(), signal.SIGKILL)\n", "killed"),
    ],
)
def test_a_run_that_crashes_before_collection_is_no_verdict(
    host: PluginHost, project: Callable[..., Path], vrequest: Request, conftest: str, message: str
) -> None:
    root = project({**GREEN, "conftest.py": conftest})
    with pytest.raises(ValidatorFault, match=message):
        host.validate(vrequest(root, "pytest"))


def test_a_conftest_that_puts_another_checkout_first_is_no_verdict(
    host: PluginHost, project: Callable[..., Path], vrequest: Request
) -> None:
    other = project({"calc.py": "def add(a, b):\n    return a + b\n"}, name="checkout")
    root = project(
        {
            "calc.py": "def add(a, b):\n    return a - b\n",  # the broken work
            "tests/test_calc.py": GREEN["tests/test_calc.py"],
            "conftest.py": f"import sys\n\nsys.path.insert(0, {str(other)!r})\n",
        }
    )
    with pytest.raises(ValidatorFault) as info:
        host.validate(vrequest(root, "pytest"))
    assert f"calc from {other / 'calc.py'}" in str(info.value)
    assert "tooling.pythonpath" in str(info.value)


def test_a_conftest_that_adds_its_own_directory_is_fine(
    host: PluginHost, project: Callable[..., Path], vrequest: Request
) -> None:
    root = project(
        {
            "lib/calc.py": "def add(a, b):\n    return a + b\n",
            "tests/test_calc.py": GREEN["tests/test_calc.py"],
            "conftest.py": "import os, sys\n\nsys.path.insert(0, os.path.join(os.path.dirname(__file__), 'lib'))\n",
        }
    )
    assert judge(host, vrequest(root, "pytest")).severity == "pass"


def test_src_layout_is_importable_without_installing_it(
    host: PluginHost, project: Callable[..., Path], vrequest: Request
) -> None:
    root = project({"src/calc/__init__.py": GREEN["calc.py"], "tests/test_calc.py": GREEN["tests/test_calc.py"]})
    verdict = judge(host, vrequest(root, "pytest"))
    assert verdict.severity == "pass", verdict
    assert verdict.details["pythonpath"][0].endswith("/src")


def test_tooling_python_that_is_not_python_is_no_verdict(
    host: PluginHost, project: Callable[..., Path], vrequest: Request
) -> None:
    root = project(GREEN)
    with pytest.raises(ValidatorFault, match=r"tooling\.python '\.venv/bin/python' does not exist"):
        host.validate(vrequest(root, "pytest", tooling={"python": ".venv/bin/python"}))
    (root / "notpython").write_text("#!/bin/sh\nexit 0\n")
    (root / "notpython").chmod(0o755)
    with pytest.raises(ValidatorFault, match="not a Python 3 interpreter"):
        host.validate(vrequest(root, "pytest", tooling={"python": "./notpython"}))
