"""What a test validator reads from its ``tooling``: the pytest command, the held-out tests, the shared settings."""

from __future__ import annotations

import contextlib
import fnmatch
import hashlib
import os
import re
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from attrs import frozen

from snodo.base.errors import ValidatorFault
from snodo.rules.settings import split_command
from snodo.workspace.pysetup import PythonSetup, python_setup

from .record import Session

DOCS = "docs/judging.md"
DEFAULT_COMMAND = ("python", "-m", "pytest")
_REPORTING = re.compile(r"^(-q+|-v+|--quiet|--verbose|-r\S*|--tb=\S+|--color=\S+|-s|--capture=\S+|--durations=\S+)$")
_VALUED = frozenset(
    {"-k", "-m", "-p", "-o", "-W", "--deselect", "--ignore", "--ignore-glob", "--maxfail", "-r", "--tb"}
)
_NODE_ID = re.compile(r"(?<![\w./-])((?:[\w.-]+/)*[\w.-]+\.py)(::[\w.:-]*\w(?:\[[^\]\s]*\])?)?")
MAX_HELD_OUT_BYTES = 50_000_000


def command_argv(command: Any) -> list[str]:
    """The argv ``tooling.command`` (a string split like a shell would, or a list) names."""
    if command is None:
        return list(DEFAULT_COMMAND)
    try:
        return split_command(command)
    except ValueError as exc:
        raise ValidatorFault(f"tooling.command: {exc}") from None


def pytest_tooling(validators: Sequence[Any]) -> dict[str, Any]:
    """The first pytest validator's tooling: a validator that needs test results shares its run."""
    for v in validators:
        if getattr(v, "validator_type", None) == "pytest":
            return dict(getattr(v, "tooling", {}) or {})
    return {}


@frozen(kw_only=True)
class Options:
    """How tests are run: pytest options, paths, plugins (autoload off), time budget, held-out tests, interpreter."""

    options: tuple[str, ...] = ()
    paths: tuple[str, ...] = ()
    plugins: tuple[str, ...] = ()
    timeout: float = 300.0
    held_out: Path | None = None
    python: Any = None
    pythonpath: Any = None
    execution_python: Any = None
    #: before the work (pre_execute) every failing test blocks, not only those passing at the base
    require_all: bool = False

    def pytest_args(self, session: Session | None, paths: Sequence[str] | None = None) -> list[str]:
        # a test module that cannot be imported yet (the task adds the name) stops no other
        args = ["-p", "no:cacheprovider", "-q", "--continue-on-collection-errors"]
        if session is not None:
            if session.inifile:
                args += ["-c", session.inifile]
            args += ["--rootdir", session.rootdir]
        args += [a for plugin in self.plugins for a in ("-p", plugin)]
        return [*args, *self.options, *(self.paths if paths is None else paths)]

    def setup(self, workspace: Path, project_root: Path) -> PythonSetup:
        return python_setup(
            workspace,
            project_root=project_root,
            python=self.python,
            pythonpath=self.pythonpath,
            execution_python=self.execution_python,
        )


def options_from_command(argv: Sequence[str]) -> tuple[tuple[str, ...], tuple[str, ...]] | None:
    """pytest's options (not those about what it prints) and paths from a test command; ``None``: not pytest."""
    if list(argv[1:3]) in (["-m", "pytest"], ["-m", "py.test"]):
        rest = iter(argv[3:])
    elif os.path.basename(argv[0] if argv else "") in ("pytest", "py.test"):
        rest = iter(argv[1:])
    else:
        return None
    options: list[str] = []
    paths: list[str] = []
    for arg in rest:
        if arg in _VALUED and (value := next(rest, None)) is not None:
            if arg not in ("-r", "--tb"):
                options += [arg, value]
        elif not arg.startswith("-"):
            paths.append(arg)
        elif not _REPORTING.match(arg):
            options.append(arg)
    return tuple(options), tuple(paths)


def named_tests(spec: str) -> tuple[str, ...]:
    """Test node ids and test files the task's text names (``tests/test_a.py::test_b``)."""
    found = []
    for m in _NODE_ID.finditer(spec):
        path, rest = m.group(1), m.group(2) or ""
        name = os.path.basename(path)
        if rest or fnmatch.fnmatchcase(name, "test_*.py") or fnmatch.fnmatchcase(name, "*_test.py"):
            found.append(path + rest.rstrip(".,:;"))
    return tuple(dict.fromkeys(found))


def held_out_dir(value: Any, project_root: Path) -> Path | None:
    """``tooling.held_out``: an existing directory outside the working tree (which agents read)."""
    if value is None:
        return None
    if not isinstance(value, str) or not value.strip():
        raise ValidatorFault("tooling.held_out must be the path of a directory outside the working tree")
    path = Path(os.path.realpath(os.path.expanduser(value.strip())))
    root = Path(os.path.realpath(project_root))
    if not path.is_absolute() or path == root or root in path.parents:
        raise ValidatorFault(
            f"tooling.held_out {value!r} lies inside the working tree {root}, where the agent can read it",
            hint=f"keep held-out tests outside the repository, e.g. ~/held-out/<project>; see {DOCS}",
        )
    if not path.is_dir():
        raise ValidatorFault(f"tooling.held_out {value!r} is not a directory")
    return path


def _walk(root: Path) -> list[Path]:
    found = []
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames[:] = sorted(d for d in dirnames if d != "__pycache__")
        found += [Path(dirpath, name) for name in sorted(filenames)]
    return found


def held_out_files(root: Path | None) -> dict[str, bytes]:
    """The held-out tests by path relative to ``root`` (at most 50 MB)."""
    if root is None:
        return {}
    found: dict[str, bytes] = {}
    total = 0
    for path in _walk(root):
        if path.is_symlink() or not path.is_file():
            continue
        data = path.read_bytes()
        total += len(data)
        if total > MAX_HELD_OUT_BYTES:
            raise ValidatorFault(f"the held-out directory {root} holds more than 50 MB")
        found[path.relative_to(root).as_posix()] = data
    return found


def held_out_digest(root: Path | None) -> str:
    """Every held-out file's path, size and modification time, hashed."""
    if root is None:
        return ""
    digest = hashlib.sha256()
    for path in _walk(root):
        with contextlib.suppress(OSError):
            st = os.stat(path)
            digest.update(f"{path}\0{st.st_size}\0{st.st_mtime_ns}\0".encode())
    return digest.hexdigest()
