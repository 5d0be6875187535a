"""The run_tests tool read from the judge's record; import roots; the interpreter setting."""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path

import pytest

from snodo.base.errors import ValidatorFault
from snodo.judging.testrun import run_tests
from snodo.workspace.pysetup import detect_import_roots, project_modules, python_setup

REPO = Path(__file__).resolve().parents[2]


def test_a_tests_own_output_cannot_fake_the_tally(tmp_path: Path) -> None:
    """The tally comes from pytest's own reports (the judge's record), never from what a test prints."""
    root = write(
        tmp_path / "ws",
        {
            "tests/test_lies.py": "def test_lies():\n    print('\\n999 passed in 0.01s')\n    assert False\n",
            "tests/test_broken.py": "import realproj_nowhere_module\n",
        },
    )
    run = run_tests(root, "tests/test_lies.py", timeout=120, options=["-s"])
    assert not run.passed and run.summary.startswith("1 failed in ") and "999" not in run.summary
    assert run.failed_tests == ("tests/test_lies.py::test_lies",)
    broken = run_tests(root, timeout=120)
    assert broken.exit_code == 2 and "ModuleNotFoundError: No module named 'realproj_nowhere_module'" in broken.summary


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


def test_a_pyproject_that_is_not_utf8_leaves_the_shape_to_decide(tmp_path: Path) -> None:
    """The project's files are hostile input: bytes that are no UTF-8 are an unreadable
    configuration, not a crash of the run."""
    root = write(tmp_path / "ws", {"src/a.py": ""})
    (root / "pyproject.toml").write_bytes(b'[tool.setuptools]\npackage-dir = {"" = "\xff"}\n')
    assert detect_import_roots(root) == [Path(os.path.realpath(root / "src"))]


def test_the_declared_roots_are_parsed_again_only_when_a_file_changed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A long-lived server does not parse ``pyproject.toml`` on every test run; a change to
    it (or to ``setup.cfg``) is seen at once, even one made within the same clock tick."""
    from snodo.workspace import pysetup

    root = write(tmp_path / "ws", {"pyproject.toml": '[tool.setuptools]\npackage-dir = {"" = "lib"}\n', "lib/a.py": ""})
    (root / "code").mkdir()
    (root / "code" / "b.py").write_text("")
    old = time.time() - 60
    os.utime(root / "pyproject.toml", (old, old))  # the mtime only: its ctime is now, so it is racy
    parsed: list[object] = []
    real_roots = pysetup._pyproject_roots
    monkeypatch.setattr(pysetup, "_pyproject_roots", lambda doc: parsed.append(doc) or real_roots(doc))
    assert detect_import_roots(root) == [Path(os.path.realpath(root / "lib"))]
    assert detect_import_roots(root) == [Path(os.path.realpath(root / "lib"))]
    assert len(parsed) == 2  # changed within 2 s of being read: read again
    monkeypatch.setattr(pysetup, "_RACY_NS", 0)
    detect_import_roots(root)
    detect_import_roots(root)
    assert len(parsed) == 3  # settled: parsed once more, then kept
    (root / "pyproject.toml").write_text('[tool.setuptools]\npackage-dir = {"" = "code"}\n')
    assert detect_import_roots(root) == [Path(os.path.realpath(root / "code"))]
    (root / "setup.cfg").write_text("[options]\npackage_dir =\n    =lib\n")
    assert Path(os.path.realpath(root / "lib")) in detect_import_roots(root)


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


# ------------------------------------------------------------------ the MCP tool uses the same run


def test_run_tests_puts_src_first_names_failures_and_refuses_foreign_imports(tmp_path: Path) -> None:
    from snodo.judging.testrun import python_settings, run_tests
    from snodo.protocol.models import Validator

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
    assert python_settings(judges) == {"python": sys.executable, "pythonpath": "src", "execution_python": None}
    assert python_settings(judges[:1], execution_python="venv/bin/python") == {"execution_python": "venv/bin/python"}


def test_a_module_file_symlinked_out_of_the_workspace_is_a_foreign_import(tmp_path: Path) -> None:
    """The recorder resolves each module's directory once and the module itself only when it
    is a link: one module file leading out of the workspace is still seen."""
    other = write(tmp_path / "checkout", {"calc/__init__.py": "def add(a, b):\n    return a + b\n"})
    root = write(
        tmp_path / "ws",
        {"tests/test_calc.py": "from calc import add\n\n\ndef test_add():\n    assert add(2, 3) == 5\n"},
    )
    (root / "calc").mkdir()
    (root / "calc" / "__init__.py").symlink_to(other / "calc" / "__init__.py")
    foreign = run_tests(root, timeout=120)
    assert not foreign.passed and foreign.exit_code == 0  # green, but not this workspace's code
    assert f"calc from {other / 'calc' / '__init__.py'}" in foreign.summary


def _swap_keeping_stat(path: Path, text: str) -> None:
    """Replace ``path``'s text with ``text`` of the same size and give it its old mtime back:
    what a timestamp ``.pyc`` records of its source (an agent writes both)."""
    before = path.stat()
    assert len(text.encode()) == before.st_size
    path.write_text(text)
    os.utime(path, ns=(before.st_atime_ns, before.st_mtime_ns))


def test_bytecode_planted_in_the_workspace_is_never_run(tmp_path: Path) -> None:
    """A ``__pycache__`` entry compiled from other source whose recorded mtime and size
    match the module beside it is ignored: the run judges the source. Without the recorder's
    guard this run passes (``return 2`` runs, the tree says ``return 3``)."""
    import py_compile

    root = write(
        tmp_path / "ws",
        {
            "hello.py": "def hello():\n    return 2\n",
            "tests/test_hello.py": "from hello import hello\n\n\ndef test_hello():\n    assert hello() == 2\n",
        },
    )
    py_compile.compile(str(root / "hello.py"), doraise=True)  # bytecode of `return 2`
    _swap_keeping_stat(root / "hello.py", "def hello():\n    return 3\n")
    assert (root / "__pycache__").is_dir()
    judged = run_tests(root, timeout=120)
    assert not judged.passed and judged.failed_tests == ("tests/test_hello.py::test_hello",), judged.summary


def test_the_interpreters_own_environment_keeps_its_bytecode_inside_the_checkout(tmp_path: Path) -> None:
    """A project's ``.venv`` inside the workspace is the interpreter's environment, trusted as
    the foreign-import check trusts it: its modules keep their cache (compiling a whole
    environment again on every run would double a test run). Shown with a cached module
    whose bytecode differs from its source: the bytecode runs."""
    import py_compile
    import site
    import subprocess

    root = write(
        tmp_path / "ws", {"tests/test_env.py": "import envmod\n\n\ndef test_env():\n    assert envmod.X == 2\n"}
    )
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(root / ".venv")], check=True, timeout=120)
    packages = next((root / ".venv" / "lib").glob("python*/site-packages"))
    (packages / "snodo_test_deps.pth").write_text("\n".join(site.getsitepackages()) + "\n")  # pytest from ours
    (packages / "envmod.py").write_text("X = 2\n")
    py_compile.compile(str(packages / "envmod.py"), doraise=True)  # bytecode of `X = 2`
    _swap_keeping_stat(packages / "envmod.py", "X = 3\n")
    kept = run_tests(root, timeout=120, python=str(root / ".venv" / "bin" / "python"))
    assert kept.passed, kept.summary + kept.output_tail
