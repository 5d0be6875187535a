"""How a Python test run is set up for one workspace: the interpreter (asked its version
in a confined process before it is trusted) and the import roots, first on the path."""

from __future__ import annotations

import os
import re
import shutil
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from attrs import frozen

from snodo.base.errors import EnvironmentProblem, ValidatorFault
from snodo.process.runner import run_process
from snodo.sandbox import current_policy
from snodo.workspace.interpreter import SNODO_OWN, dig, project_python, read_toml

DOCS = "docs/validators.md"
_IDENTIFIER = re.compile(r"^[A-Za-z_]\w*$")


@frozen(kw_only=True)
class PythonSetup:
    python: str
    python_source: str  # where the interpreter came from: a setting, or how it was found
    pythonpath: tuple[str, ...]  # absolute directories, the workspace's import roots first
    modules: tuple[str, ...]  # top-level names of the project's own modules and packages
    workspace: Path


def python_setup(
    workspace: Path,
    *,
    project_root: Path | None = None,
    python: Any = None,
    pythonpath: Any = None,
    execution_python: Any = None,
) -> PythonSetup:
    """The interpreter (``tooling.python``, else ``execution.python``, else :func:`project_python`'s;
    relative to the project root) and the import roots (``pythonpath``, else detected); or a :class:`ValidatorFault`."""
    workspace = Path(os.path.realpath(workspace))
    if not workspace.is_dir():
        raise ValidatorFault(f"cannot run tests: the workspace {workspace} is not a directory")
    root = Path(project_root) if project_root is not None else workspace
    if python is not None:
        interpreter, source = _interpreter(python, root, "tooling.python"), "tooling.python"
    elif execution_python is not None:
        interpreter, source = _interpreter(execution_python, root, "execution.python"), "execution.python"
    else:
        found = project_python(root)
        source = found.source
        interpreter = found.path if source == SNODO_OWN else _interpreter(found.path, root, f"the {source} interpreter")
    roots = _pythonpath_setting(workspace, pythonpath) if pythonpath is not None else detect_import_roots(workspace)
    ordered = list(dict.fromkeys((*roots, workspace)))
    return PythonSetup(
        python=interpreter,
        python_source=source,
        pythonpath=tuple(str(p) for p in ordered),
        modules=project_modules(ordered),
        workspace=workspace,
    )


def _interpreter(python: Any, project_root: Path, where: str) -> str:
    if not isinstance(python, str) or not python.strip():
        raise ValidatorFault(f"{where} must be a path to a Python interpreter, e.g. .venv/bin/python")
    value = os.path.expanduser(python.strip())
    if os.sep not in value:
        found = shutil.which(value)
        if found is None:
            raise ValidatorFault(
                f"{where} {python!r} was not found on PATH",
                hint=f"give a path, e.g. .venv/bin/python (relative to the project root); see {DOCS}",
            )
        value = found
    elif not os.path.isabs(value):
        # Not resolved through symlinks: a virtual environment's python is a symlink whose
        # own location is what makes it that environment's interpreter.
        value = os.path.normpath(os.path.join(project_root, value))
    if not os.path.isfile(value) or not os.access(value, os.X_OK):
        raise ValidatorFault(
            f"{where} {python!r} does not exist or is not executable (looked for {value}; relative "
            f"paths are resolved against the project root {project_root})",
            hint=f"create the environment (python -m venv .venv, then install pytest and the project) or fix "
            f"execution.python; see {DOCS}",
        )
    _check_answers(value, python, project_root, where)
    return value


def _check_answers(value: str, python: str, project_root: Path, where: str) -> None:
    """Ask the interpreter its version in a confined process, once per :func:`_identity`, not on every call."""
    identity = _identity(value)
    if identity in _ANSWERED:
        return
    try:
        probe = run_process(
            [value, "-c", "import sys; print('snodo-python', sys.version_info[0], sys.version_info[1])"],
            cwd=project_root if project_root.is_dir() else Path(tempfile.gettempdir()),
            timeout=60,
            sandbox=current_policy(),
        )
        answered, shown = probe.ok and "snodo-python 3" in probe.output, probe.tail(3).strip()
        shown = shown or f"exit code {probe.returncode}"
    except EnvironmentProblem as exc:
        answered, shown = False, exc.message
    if not answered:
        raise ValidatorFault(
            f"{where} {python!r} ({value}) is not a Python 3 interpreter: asked for its version it answered {shown!r}",
            hint=f"point execution.python at the project's Python, e.g. .venv/bin/python; see {DOCS}",
        )
    _ANSWERED.add(identity)


_ANSWERED: set[tuple[object, ...]] = set()


def _identity(path: str) -> tuple[object, ...]:
    """What the answer depends on: the path, what it resolves to, that file's and the
    environment's ``pyvenv.cfg``'s stat (an agent can write a ``.venv`` in the workspace)."""
    real = os.path.realpath(path)
    cfg = os.path.join(os.path.dirname(os.path.dirname(path)), "pyvenv.cfg")
    return (path, real, _stamp(real), cfg, _stamp(cfg))


def _stamp(path: str | Path) -> tuple[int, int, int, int, int, int] | None:
    try:
        st = os.stat(path)
    except OSError:
        return None
    return (st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns, st.st_mode)


def _pythonpath_setting(workspace: Path, pythonpath: Any) -> list[Path]:
    entries = [pythonpath] if isinstance(pythonpath, str) else pythonpath
    if not isinstance(entries, list | tuple) or not all(isinstance(e, str) and e.strip() for e in entries):
        raise ValidatorFault("tooling.pythonpath must be a directory or a list of directories inside the project")
    roots: list[Path] = []
    for entry in entries:
        target = Path(os.path.realpath(workspace / entry.strip()))
        if os.path.isabs(entry) or not target.is_relative_to(workspace):
            raise ValidatorFault(
                f"tooling.pythonpath entry {entry!r} is outside the project; the tests must import the "
                "code under judgement, so only directories inside the project are allowed",
                hint=f"give paths relative to the project root, e.g. [src]; see {DOCS}",
            )
        if not target.is_dir():
            raise ValidatorFault(
                f"tooling.pythonpath entry {entry!r} is not a directory of the project",
                hint=f"fix the path (relative to the project root); see {DOCS}",
            )
        roots.append(target)
    return roots


def detect_import_roots(workspace: Path) -> list[Path]:
    """The declared package directories, else ``src/``."""
    roots: list[Path] = []
    for rel in _declared_roots(workspace):
        target = Path(os.path.realpath(workspace / rel))
        if target.is_relative_to(workspace) and target.is_dir() and target not in roots:
            roots.append(target)
    src = workspace / "src"
    if not roots and src.is_dir() and project_modules([src]):
        roots.append(Path(os.path.realpath(src)))
    return roots


#: The package directories ``pyproject.toml`` and ``setup.cfg`` declare, by workspace, with
#: their stamps; a file changed within ``_RACY_NS`` (a clock tick) before it was read is read again.
_RACY_NS = 2_000_000_000
_DECLARED: dict[Path, tuple[tuple[object, ...], tuple[str, ...]]] = {}


def _declared_roots(workspace: Path) -> tuple[str, ...]:
    pyproject, setup_cfg = workspace / "pyproject.toml", workspace / "setup.cfg"
    stamps = (_stamp(pyproject), _stamp(setup_cfg))
    cached = _DECLARED.get(workspace)
    if cached is not None and cached[0] == stamps:
        return cached[1]
    now = time.time_ns()
    declared = _pyproject_roots(read_toml(pyproject)) + _setup_cfg_roots(setup_cfg)
    if len(_DECLARED) > 64:
        _DECLARED.clear()
    if all(stamp is None or now - stamp[4] >= _RACY_NS for stamp in stamps):  # [4]: the ctime
        _DECLARED[workspace] = (stamps, tuple(declared))
    else:
        _DECLARED.pop(workspace, None)
    return tuple(declared)


def _pyproject_roots(doc: dict[str, Any]) -> list[str]:
    tool = doc.get("tool")
    found = [dig(tool, "setuptools", "package-dir", "")]
    found += _strings(dig(tool, "setuptools", "packages", "find", "where"))
    found += [
        str(Path(p).parent) for p in _strings(dig(tool, "hatch", "build", "targets", "wheel", "packages")) if "/" in p
    ]
    poetry = dig(tool, "poetry", "packages")
    found += [dig(p, "from") for p in poetry] if isinstance(poetry, list) else []
    found += [dig(tool, "pdm", "build", "package-dir"), dig(tool, "maturin", "python-source")]
    return [f for f in found if isinstance(f, str)]


def _strings(value: Any) -> list[str]:
    return [v for v in value if isinstance(v, str)] if isinstance(value, list) else []


def _setup_cfg_roots(path: Path) -> list[str]:
    if not path.is_file():
        return []
    import configparser  # noqa: PLC0415 only a project with setup.cfg

    parser = configparser.ConfigParser(interpolation=None)
    try:
        parser.read(path, encoding="utf-8")
    except (configparser.Error, UnicodeDecodeError):
        return []
    found: list[str] = []
    for line in parser.get("options", "package_dir", fallback="").splitlines():
        name, eq, target = line.partition("=")
        if eq and not name.strip() and target.strip():
            found.append(target.strip())
    found += [w.strip() for w in parser.get("options.packages.find", "where", fallback="").split() if w.strip()]
    return found


def project_modules(roots: Sequence[Path]) -> tuple[str, ...]:
    names: set[str] = set()
    for root in roots:
        for entry in _listing(root):
            if entry.is_file() and entry.name.endswith(".py") and _IDENTIFIER.match(entry.name[:-3]):
                names.add(entry.name[:-3])
            elif entry.is_dir(follow_symlinks=False) and _IDENTIFIER.match(entry.name) and _holds_python(entry.path):
                names.add(entry.name)
    return tuple(sorted(names))


def _holds_python(path: str) -> bool:
    return any(e.name.endswith(".py") for e in _listing(path) if e.is_file())


def _listing(path: str | Path) -> list[os.DirEntry[str]]:
    try:
        with os.scandir(path) as listing:
            return list(listing)
    except OSError:
        return []
