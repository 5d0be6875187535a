"""The one home of running a project's Python tests and reading what they showed.

Every test run snodo judges goes through here: the pytest validator and the acceptance
criterion "tests pass" (through :mod:`snodo.api`) and the MCP ``run_tests`` tool. A run

- uses the interpreter ``tooling.python`` names (relative to the project root, so
  ``.venv/bin/python`` works from an engine worktree), else snodo's own;
- puts the workspace's import roots first on ``PYTHONPATH`` (``src/`` layouts detected
  from ``pyproject.toml``/``setup.cfg`` or the directory shape, or ``tooling.pythonpath``)
  and drops an inherited ``PYTHONPATH``, so the tests import the code under judgement;
- loads snodo's import probe (a tiny pytest plugin), which reports any of the project's own
  modules imported from outside the workspace (an editable install pointing at the user's
  checkout, a conftest that edits ``sys.path``): such a run proves nothing and is refused;
- writes no byte-code and no pytest cache, so judging never changes the tree;
- runs without a shell in its own process group, killed as a group at the time limit.

:func:`read_test_output` is the one reader of pytest's output: summary line, failed test
ids and a bounded excerpt of the failures.
"""

from __future__ import annotations

import configparser
import contextlib
import json
import os
import re
import shutil
import sys
import tempfile
import tomllib
from collections.abc import Sequence
from pathlib import Path
from typing import Any, ClassVar

from attrs import frozen

from snodo.errors import EnvironmentProblem, ToolError, ValidatorFault
from snodo.proc import run_process
from snodo.sandbox import current_policy
from snodo.workspace.guard import PathGuard

PROBE_DIR = Path(__file__).resolve().parent / "pytest_probe"
PROBE_PLUGIN = "snodo_import_probe"
PROBE_MARKER = "snodo-import-report: "
DOCS = "docs/validators.md"

# No cache directory and no bytecode: judging the work must not change the work tree.
DEFAULT_COMMAND = ("python", "-m", "pytest", "-q")
NO_TESTS_COLLECTED = 5
TAIL_LINES = 60
EXCERPT_CHARS = 4000
MAX_FAILED_IDS = 50
# "3 passed, 1 warning in 0.12s", "1 failed, 2 passed in 1.01s", "no tests ran in 0.01s"
_SUMMARY = re.compile(r"^=*\s*((?:no tests ran|\d+ \w+(?:, \d+ \w+)*) in [\d.]+s(?: \([\d:]+\))?)\s*=*$")
_SHORT_FAILURE = re.compile(r"^(?:FAILED|ERROR) (\S+)")
_SECTION = re.compile(r"^=+ (FAILURES|ERRORS) =+$")
_SHORT_SUMMARY = re.compile(r"^=+ short test summary info =+$")
_IDENTIFIER = re.compile(r"^[A-Za-z_]\w*$")


# ---------------------------------------------------------------------- reading


@frozen(kw_only=True)
class TestOutput:
    """What pytest's output says: its closing tally, the failed test ids, the failures shown."""

    __test__: ClassVar[bool] = False  # not a pytest test class, despite the name

    summary: str | None
    failed_tests: tuple[str, ...]
    excerpt: str


def read_test_output(output: str, *, excerpt_chars: int = EXCERPT_CHARS) -> TestOutput:
    """Read a pytest run's output. ``summary`` is ``None`` when no pytest tally was printed."""
    lines = [line for line in output.splitlines() if not line.startswith(PROBE_MARKER)]
    summary = None
    for line in reversed(lines):
        match = _SUMMARY.match(line.strip())
        if match:
            summary = match.group(1).strip()
            break
    failed: list[str] = []
    for line in lines:
        match = _SHORT_FAILURE.match(line)
        if match and match.group(1) not in failed:
            failed.append(match.group(1))
    return TestOutput(
        summary=summary, failed_tests=tuple(failed[:MAX_FAILED_IDS]), excerpt=_excerpt(lines, excerpt_chars)
    )


def _excerpt(lines: list[str], limit: int) -> str:
    """The failures section (or the tail of the output), cut to ``limit`` characters."""
    start = next((i for i, line in enumerate(lines) if _SECTION.match(line.strip())), None)
    if start is None:
        chosen = lines[-40:]
    else:
        end = next((i for i in range(start, len(lines)) if _SHORT_SUMMARY.match(lines[i].strip())), len(lines))
        chosen = lines[start:end]
    text = "\n".join(chosen).strip("\n")
    if len(text) <= limit:
        return text
    head, tail = (limit * 3) // 4, limit // 4
    return f"{text[:head]}\n[... {len(text) - head - tail} characters cut ...]\n{text[-tail:]}"


# ------------------------------------------------------------------ the set-up


@frozen(kw_only=True)
class PythonSetup:
    """How a Python test run is set up for one workspace."""

    python: str
    pythonpath: tuple[str, ...]  # absolute directories, the workspace's import roots first
    modules: tuple[str, ...]  # top-level names of the project's own modules and packages
    workspace: Path
    project_root: Path  # the user's checkout (the workspace itself outside the engine)


def python_setup(
    workspace: Path,
    *,
    project_root: Path | None = None,
    python: Any = None,
    pythonpath: Any = None,
) -> PythonSetup:
    """Resolve ``tooling.python`` and the import roots; raises :class:`ValidatorFault` on bad settings."""
    workspace = Path(os.path.realpath(workspace))
    if not workspace.is_dir():
        raise ValidatorFault(f"cannot run tests: the workspace {workspace} is not a directory")
    root = Path(project_root) if project_root is not None else workspace
    interpreter = _interpreter(python, root)
    roots = _pythonpath_setting(workspace, pythonpath) if pythonpath is not None else detect_import_roots(workspace)
    ordered: list[Path] = []
    for entry in (*roots, workspace):
        if entry not in ordered:
            ordered.append(entry)
    return PythonSetup(
        python=interpreter,
        pythonpath=tuple(str(p) for p in ordered),
        modules=project_modules(ordered),
        workspace=workspace,
        project_root=Path(os.path.realpath(root)),
    )


def _interpreter(python: Any, project_root: Path) -> str:
    if python is None:
        return sys.executable
    if not isinstance(python, str) or not python.strip():
        raise ValidatorFault("tooling.python must be a path to a Python interpreter, e.g. .venv/bin/python")
    value = os.path.expanduser(python.strip())
    if os.sep not in value:
        found = shutil.which(value)
        if found is None:
            raise ValidatorFault(
                f"tooling.python {python!r} was not found on PATH",
                hint=f"give a path, e.g. .venv/bin/python (relative to the project root); see {DOCS}",
            )
        value = found
    elif not os.path.isabs(value):
        # Not resolved through symlinks: a virtual environment's python is a symlink whose
        # own location is what makes it that environment's interpreter.
        value = os.path.normpath(os.path.join(project_root, value))
    if not os.path.isfile(value) or not os.access(value, os.X_OK):
        raise ValidatorFault(
            f"tooling.python {python!r} does not exist or is not executable (looked for {value}; relative "
            f"paths are resolved against the project root {project_root})",
            hint=f"create the environment (python -m venv .venv, then install pytest and the project) or fix "
            f"tooling.python; see {DOCS}",
        )
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
            f"tooling.python {python!r} ({value}) is not a Python 3 interpreter: asked for its version it "
            f"answered {shown!r}",
            hint=f"point tooling.python at the project's Python, e.g. .venv/bin/python; see {DOCS}",
        )
    return value


def _pythonpath_setting(workspace: Path, pythonpath: Any) -> list[Path]:
    entries = [pythonpath] if isinstance(pythonpath, str) else pythonpath
    if not isinstance(entries, list | tuple) or not all(isinstance(e, str) and e.strip() for e in entries):
        raise ValidatorFault("tooling.pythonpath must be a directory or a list of directories inside the project")
    roots: list[Path] = []
    for entry in entries:
        target = Path(os.path.realpath(workspace / entry.strip()))
        if os.path.isabs(entry) or not (target == workspace or workspace in target.parents):
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
    """Where the project's importable code lives: declared package directories, else ``src/``."""
    declared: list[str] = []
    try:
        with open(workspace / "pyproject.toml", "rb") as fh:
            declared += _pyproject_roots(tomllib.load(fh))
    except (OSError, tomllib.TOMLDecodeError):
        pass
    declared += _setup_cfg_roots(workspace / "setup.cfg")
    roots: list[Path] = []
    for rel in declared:
        target = Path(os.path.realpath(workspace / rel))
        if (target == workspace or workspace in target.parents) and target.is_dir() and target not in roots:
            roots.append(target)
    src = workspace / "src"
    if not roots and src.is_dir() and project_modules([src]):
        roots.append(Path(os.path.realpath(src)))
    return roots


def _pyproject_roots(doc: dict[str, Any]) -> list[str]:
    tool = doc.get("tool") if isinstance(doc.get("tool"), dict) else {}
    assert isinstance(tool, dict)
    found: list[str] = []

    def get(*keys: str) -> Any:
        node: Any = tool
        for key in keys:
            if not isinstance(node, dict):
                return None
            node = node.get(key)
        return node

    package_dir = get("setuptools", "package-dir")
    if isinstance(package_dir, dict) and isinstance(package_dir.get(""), str):
        found.append(package_dir[""])
    where = get("setuptools", "packages", "find", "where")
    if isinstance(where, list):
        found += [w for w in where if isinstance(w, str)]
    hatch = get("hatch", "build", "targets", "wheel", "packages")
    if isinstance(hatch, list):
        found += [str(Path(p).parent) for p in hatch if isinstance(p, str) and "/" in p]
    poetry = get("poetry", "packages")
    if isinstance(poetry, list):
        found += [p["from"] for p in poetry if isinstance(p, dict) and isinstance(p.get("from"), str)]
    for keys in (("pdm", "build", "package-dir"), ("maturin", "python-source")):
        value = get(*keys)
        if isinstance(value, str):
            found.append(value)
    return found


def _setup_cfg_roots(path: Path) -> list[str]:
    if not path.is_file():
        return []
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
    """Top-level module and package names found directly in ``roots``."""
    names: set[str] = set()
    for root in roots:
        try:
            with os.scandir(root) as listing:
                entries = list(listing)
        except OSError:
            continue
        for entry in entries:
            if entry.is_file() and entry.name.endswith(".py") and _IDENTIFIER.match(entry.name[:-3]):
                names.add(entry.name[:-3])
            elif entry.is_dir(follow_symlinks=False) and _IDENTIFIER.match(entry.name) and _holds_python(entry.path):
                names.add(entry.name)
    return tuple(sorted(names))


def _holds_python(path: str) -> bool:
    try:
        with os.scandir(path) as listing:
            return any(e.name.endswith(".py") for e in listing if e.is_file())
    except OSError:
        return False


def python_argv(argv: Sequence[str], setup: PythonSetup) -> list[str]:
    """``argv`` with a leading ``python``/``python3`` (or ``pytest``) run by the set-up's interpreter."""
    out = list(argv)
    if out and out[0] in ("python", "python3"):
        out[0] = setup.python
    elif out and out[0] == "pytest":
        out[:1] = [setup.python, "-m", "pytest"]
    return out


# ------------------------------------------------------------------- running


@frozen(kw_only=True)
class SuiteRun:
    """One real test run: its output read, and what the import probe saw.

    ``exit_code`` is ``None`` when the run was killed at the time limit. ``imports`` is
    ``None`` when the probe did not report (the command did not run pytest in an
    interpreter that got snodo's environment); else ``{"checked": n, "foreign": {module: path}}``.
    """

    argv: tuple[str, ...]
    exit_code: int | None
    timed_out: bool
    duration: float
    output: str
    read: TestOutput
    imports: dict[str, Any] | None
    setup: PythonSetup

    @property
    def foreign_imports(self) -> dict[str, str]:
        return dict((self.imports or {}).get("foreign") or {})

    @property
    def failed_tests(self) -> tuple[str, ...]:
        probed = (self.imports or {}).get("failed")
        if isinstance(probed, list) and probed:
            return tuple(str(t) for t in probed[:MAX_FAILED_IDS])
        return self.read.failed_tests

    def tail(self, lines: int = 40) -> str:
        kept = [line for line in self.output.splitlines() if not line.startswith(PROBE_MARKER)]
        return "\n".join(kept[-lines:])

    def foreign_message(self) -> str:
        """Why a run that imported the project from elsewhere proves nothing, and the fix."""
        shown = "; ".join(f"{name} from {path}" for name, path in sorted(self.foreign_imports.items())[:5])
        return (
            f"the tests imported the project's own code from outside the workspace {self.setup.workspace}: "
            f"{shown}. Their result says nothing about this work. Put the workspace's import roots on the path "
            f"with tooling.pythonpath (e.g. [src]), do not add other checkouts to sys.path in conftest.py, and "
            f"check that tooling.python ({self.setup.python}) does not shadow them; see {DOCS}"
        )


def run_python_tests(
    workspace: Path,
    command: Sequence[str],
    *,
    timeout: float,
    project_root: Path | None = None,
    python: Any = None,
    pythonpath: Any = None,
) -> SuiteRun:
    """Set up and run ``command`` in ``workspace`` (see the module docstring); the plugins' entry point.

    A leading ``python``/``python3`` in ``command`` is the interpreter ``python`` names (a
    relative path resolves against ``project_root``), a leading ``pytest`` is ``python -m pytest``.
    Raises :class:`ValidatorFault` for settings that cannot work.
    """
    setup = python_setup(workspace, project_root=project_root, python=python, pythonpath=pythonpath)
    return run_suite(python_argv(command, setup), setup, timeout=timeout)


def run_suite(argv: Sequence[str], setup: PythonSetup, *, timeout: float) -> SuiteRun:
    """Run ``argv`` (already through :func:`python_argv`) in the workspace with the import probe."""
    if timeout <= 0:
        raise ToolError("the test timeout must be positive")
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    env["PYTHONPATH"] = os.pathsep.join([*setup.pythonpath, str(PROBE_DIR)])
    env["PYTHONDONTWRITEBYTECODE"] = "1"
    env["PYTEST_ADDOPTS"] = f"{env.get('PYTEST_ADDOPTS', '')} -p no:cacheprovider -p {PROBE_PLUGIN}".strip()
    env["SNODO_PROJECT_MODULES"] = ",".join(setup.modules)
    env["SNODO_IMPORT_WORKSPACE"] = str(setup.workspace)
    env["SNODO_IMPORT_PROJECT_ROOT"] = "" if setup.project_root == setup.workspace else str(setup.project_root)
    with tempfile.TemporaryDirectory(prefix="snodo-tests-") as scratch:
        report_file = Path(scratch) / "imports.json"
        env["SNODO_IMPORT_REPORT"] = str(report_file)
        result = run_process(list(argv), cwd=setup.workspace, timeout=timeout, env=env, sandbox=current_policy())
        imports = _load_report(report_file, result.output)
    return SuiteRun(
        argv=tuple(argv),
        exit_code=result.returncode,
        timed_out=result.timed_out,
        duration=result.duration,
        output=result.output,
        read=read_test_output(result.output),
        imports=imports,
        setup=setup,
    )


def _load_report(path: Path, output: str) -> dict[str, Any] | None:
    texts: list[str] = []
    with contextlib.suppress(OSError):
        texts.append(path.read_text(encoding="utf-8"))
    texts += [line[len(PROBE_MARKER) :] for line in reversed(output.splitlines()) if line.startswith(PROBE_MARKER)]
    for text in texts:
        try:
            data = json.loads(text)
        except ValueError:
            continue
        if isinstance(data, dict) and isinstance(data.get("foreign"), dict):
            return data
    return None


# ------------------------------------------------------------ the MCP tool


def python_settings(validators: Sequence[Any]) -> dict[str, Any]:
    """``python``/``pythonpath`` from the first of ``validators`` whose tooling sets either.

    The MCP ``run_tests`` tool has no tooling of its own: it runs the tests the way the
    mode's test-running validators are configured to.
    """
    for v in validators:
        tooling = getattr(v, "tooling", None) or {}
        if "python" in tooling or "pythonpath" in tooling:
            return {"python": tooling.get("python"), "pythonpath": tooling.get("pythonpath")}
    return {}


@frozen(kw_only=True)
class TestRunResult:
    """What a ``run_tests`` call showed: ``passed`` only for exit code 0 within the time limit,
    with every one of the project's modules imported from the project.

    ``exit_code`` is ``None`` when the run was killed at the time limit.
    """

    __test__: ClassVar[bool] = False  # not a pytest test class, despite the name

    exit_code: int | None
    passed: bool
    summary: str
    output_tail: str
    timed_out: bool
    duration: float
    failed_tests: tuple[str, ...] = ()


def run_tests(
    root: Path,
    path: str | None = None,
    *,
    timeout: float = 300,
    command: Sequence[str] | None = None,
    python: Any = None,
    pythonpath: Any = None,
) -> TestRunResult:
    """Run the tests of the project at ``root`` (or only ``path``) and summarise them.

    ``command`` replaces :data:`DEFAULT_COMMAND`; ``python`` and ``pythonpath`` are the
    protocol's tooling settings; ``path`` comes from the agent and must be inside the root.
    """
    if command is not None and (
        isinstance(command, str) or not command or not all(isinstance(a, str) and a for a in command)
    ):
        raise ToolError("a test command must be a non-empty list of non-empty strings")
    if timeout <= 0:
        raise ToolError("the test timeout must be positive")
    if not Path(root).is_dir():
        raise ToolError(f"cannot run tests: {root} is not a directory")
    setup = python_setup(Path(root), project_root=Path(root), python=python, pythonpath=pythonpath)
    argv = python_argv(command if command is not None else DEFAULT_COMMAND, setup)
    if path is not None:
        if not isinstance(path, str) or path.startswith("-"):
            raise ToolError(f"run_tests path {path!r} is refused: it must be a path, not an option")
        PathGuard(root).check_read(path)
        argv.append(path)
    run = run_suite(argv, setup, timeout=timeout)
    code = run.exit_code
    foreign = run.foreign_imports
    if run.timed_out:
        summary = f"timed out after {timeout:g} s; the test run was killed"
    elif foreign:
        summary = run.foreign_message()
    elif code == NO_TESTS_COLLECTED:
        summary = "no tests collected"
    else:
        summary = run.read.summary or f"exit code {code}"
    return TestRunResult(
        exit_code=code,
        passed=code == 0 and not run.timed_out and not foreign,
        summary=summary,
        output_tail=run.tail(TAIL_LINES),
        timed_out=run.timed_out,
        duration=run.duration,
        failed_tests=run.failed_tests,
    )
