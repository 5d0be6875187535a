"""The one test-run reader: pytest output, import roots, the interpreter setting, and that it is the only one."""

from __future__ import annotations

import os
import re
import sys
from pathlib import Path

import pytest

from snodo.errors import ValidatorFault
from snodo.workspace.testrun import (
    PROBE_MARKER,
    detect_import_roots,
    project_modules,
    python_setup,
    read_test_output,
)

REPO = Path(__file__).resolve().parents[2]

RED_OUTPUT = """\
F.                                                                       [100%]
=================================== FAILURES ===================================
___________________________________ test_add ___________________________________

    def test_add():
>       assert add(2, 3) == 5
E       assert -1 == 5

tests/test_calc.py:5: AssertionError
=========================== short test summary info ============================
FAILED tests/test_calc.py::test_add - assert -1 == 5
ERROR tests/test_other.py - ImportError: boom
snodo-import-report: {"foreign": {}}
1 failed, 1 passed, 1 error in 0.03s
"""


def test_reads_summary_failed_ids_and_the_failures_section() -> None:
    read = read_test_output(RED_OUTPUT)
    assert read.summary == "1 failed, 1 passed, 1 error in 0.03s"
    assert read.failed_tests == ("tests/test_calc.py::test_add", "tests/test_other.py")
    assert read.excerpt.startswith("=") and "assert -1 == 5" in read.excerpt
    assert "short test summary" not in read.excerpt and PROBE_MARKER not in read.excerpt


def test_no_summary_is_none_and_the_excerpt_is_bounded() -> None:
    assert read_test_output("hello\nworld\n").summary is None
    assert read_test_output("3 passed\n").summary is None  # a test's own print is not pytest's tally
    long = "=== FAILURES ===\n" + "\n".join(f"line {i} " + "x" * 100 for i in range(500))
    excerpt = read_test_output(long, excerpt_chars=2000).excerpt
    assert len(excerpt) < 2100 and "characters cut" in excerpt
    assert excerpt.startswith("=== FAILURES ===") and excerpt.endswith("x" * 20)


def write(root: Path, files: dict[str, str]) -> Path:
    for rel, content in files.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(content)
    return root


@pytest.mark.parametrize(
    ("files", "expected"),
    [
        ({"pyproject.toml": '[tool.setuptools.packages.find]\nwhere = ["src"]\n', "src/a/__init__.py": ""}, ["src"]),
        ({"pyproject.toml": '[tool.setuptools]\npackage-dir = {"" = "lib"}\n', "lib/a.py": ""}, ["lib"]),
        ({"pyproject.toml": '[tool.hatch.build.targets.wheel]\npackages = ["code/a"]\n', "code/a/x.py": ""}, ["code"]),
        (
            {"pyproject.toml": '[tool.poetry]\npackages = [{include = "a", from = "pkgs"}]\n', "pkgs/a/x.py": ""},
            ["pkgs"],
        ),
        ({"setup.cfg": "[options]\npackage_dir =\n    =source\n", "source/a.py": ""}, ["source"]),
        ({"setup.cfg": "[options.packages.find]\nwhere = src\n", "src/a.py": ""}, ["src"]),
        ({"src/a/__init__.py": ""}, ["src"]),  # the directory shape alone
        ({"a.py": "", "src/README": "no code here"}, []),  # flat: the workspace itself
        ({"pyproject.toml": '[tool.setuptools.packages.find]\nwhere = [".."]\n'}, []),  # outside: ignored
        ({"pyproject.toml": "not = [toml", "src/a.py": ""}, ["src"]),  # unreadable config: the shape decides
    ],
)
def test_import_roots_are_detected(tmp_path: Path, files: dict[str, str], expected: list[str]) -> None:
    root = write(tmp_path / "ws", files)
    assert detect_import_roots(root) == [Path(os.path.realpath(root / e)) for e in expected]


def test_setup_orders_roots_first_and_names_the_project_modules(tmp_path: Path) -> None:
    root = write(
        tmp_path / "ws", {"src/calc/__init__.py": "", "src/ns/mod.py": "", "tests/test_x.py": "", "tool.py": ""}
    )
    setup = python_setup(root)
    real = os.path.realpath(root)
    assert setup.pythonpath == (f"{real}/src", real)
    assert setup.python == sys.executable
    assert {"calc", "ns", "tool", "tests"} <= set(setup.modules)
    assert project_modules([root / "nowhere"]) == ()
    assert python_setup(root, pythonpath=["tests"]).pythonpath == (f"{real}/tests", real)
    assert python_setup(root, pythonpath="src").pythonpath == (f"{real}/src", real)


@pytest.mark.parametrize(
    ("pythonpath", "message"),
    [
        ("../elsewhere", "outside the project"),
        ("/usr/lib", "outside the project"),
        ("missing", "not a directory"),
        (["src", 3], "list of directories"),
        ([], None),
    ],
)
def test_bad_pythonpath_is_refused(tmp_path: Path, pythonpath: object, message: str | None) -> None:
    root = write(tmp_path / "ws", {"src/a.py": ""})
    (tmp_path / "elsewhere").mkdir()
    if message is None:
        assert python_setup(root, pythonpath=pythonpath).pythonpath == (os.path.realpath(root),)
        return
    with pytest.raises(ValidatorFault, match=message) as info:
        python_setup(root, pythonpath=pythonpath)
    assert "docs/validators.md" in str(info.value) or message == "list of directories"


def test_python_resolves_against_the_project_root_not_the_workspace(tmp_path: Path) -> None:
    checkout = tmp_path / "checkout"
    (checkout / ".venv" / "bin").mkdir(parents=True)
    os.symlink(sys.executable, checkout / ".venv" / "bin" / "python")
    worktree = write(tmp_path / "worktree", {"a.py": ""})
    setup = python_setup(worktree, project_root=checkout, python=".venv/bin/python")
    assert setup.python == str(checkout / ".venv" / "bin" / "python")  # the symlink itself, not its target
    with pytest.raises(ValidatorFault, match=r"does not exist.*project root"):
        python_setup(worktree, project_root=worktree, python=".venv/bin/python")


@pytest.mark.parametrize("kind", ["missing", "not-executable", "shell-script", "binary", "not-on-path", "empty"])
def test_a_python_that_is_not_python_is_refused(tmp_path: Path, kind: str) -> None:
    root = write(tmp_path / "ws", {"a.py": ""})
    target = tmp_path / "fake-python"
    if kind == "not-executable":
        target.write_text("print('hi')\n")
    elif kind == "shell-script":
        target.write_text("#!/bin/sh\necho 'I am not Python'\n")
        target.chmod(0o755)
    elif kind == "binary":
        os.symlink("/bin/true" if os.path.exists("/bin/true") else "/usr/bin/true", target)
    value = {"not-on-path": "snodo-no-such-python3", "empty": "  "}.get(kind, str(target))
    with pytest.raises(ValidatorFault, match=r"tooling\.python") as info:
        python_setup(root, python=value)
    text = str(info.value)
    if kind == "shell-script":
        assert "not a Python 3 interpreter" in text and "I am not Python" in text


# --------------------------------------------------------------- one reader (issue: one home per rule)

_TALLY = re.compile(r"re\.compile\([^\n]*(passed|no tests ran)", re.IGNORECASE)


def test_there_is_one_test_run_reader() -> None:
    """Only the core's testrun module reads pytest tallies; plugins reach it through snodo.api."""
    readers = sorted(
        str(path.relative_to(REPO))
        for top in ("snodo", "plugins", "conformance")
        for path in (REPO / top).rglob("*.py")
        if _TALLY.search(path.read_text(encoding="utf-8"))
    )
    assert readers == ["snodo/workspace/testrun.py"]
    plugin = (REPO / "plugins" / "validators" / "_testrun.py").read_text(encoding="utf-8")
    assert "run_python_tests" in plugin and "from snodo.api import" in plugin
    import snodo.api

    assert {"read_test_output", "run_python_tests", "SuiteRun", "TestOutput"} <= set(snodo.api.__all__)


# ------------------------------------------------------------------ the MCP tool uses the same run


def test_run_tests_puts_src_first_names_failures_and_refuses_foreign_imports(tmp_path: Path) -> None:
    from snodo.protocol.models import Validator
    from snodo.workspace.testrun import python_settings, run_tests

    root = write(
        tmp_path / "ws",
        {
            "src/calc/__init__.py": "def add(a, b):\n    return a - b\n",
            "tests/test_calc.py": "from calc import add\n\n\ndef test_add():\n    assert add(2, 3) == 5\n",
        },
    )
    red = run_tests(root, timeout=120)
    assert not red.passed and red.failed_tests == ("tests/test_calc.py::test_add",)
    assert red.summary.startswith("1 failed")

    other = write(tmp_path / "checkout", {"calc/__init__.py": "def add(a, b):\n    return a + b\n"})
    (root / "conftest.py").write_text(f"import sys\n\nsys.path.insert(0, {str(other)!r})\n")
    foreign = run_tests(root, timeout=120)
    assert not foreign.passed and foreign.exit_code == 0  # green, but not this project's code
    assert f"calc from {other / 'calc' / '__init__.py'}" in foreign.summary

    judges = (
        Validator(validator_id="a", validator_type="protocol"),
        Validator(validator_id="b", validator_type="pytest", tooling={"python": sys.executable, "pythonpath": "src"}),
    )
    assert python_settings(judges) == {"python": sys.executable, "pythonpath": "src"}
    assert python_settings(judges[:1]) == {}
