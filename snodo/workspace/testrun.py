"""The one home of running a project's Python tests and reading what they showed (the
pytest validator through :mod:`snodo.api`, and the MCP ``run_tests`` tool).

A run is set up by :mod:`snodo.workspace.pysetup`, loads snodo's import probe (a pytest
plugin that refuses a run importing the project from outside the workspace and is the
structured reading of the run: nothing parses pytest's terminal output), writes no
byte-code and no pytest cache, and runs without a shell, killed as a group at its time limit.
"""

from __future__ import annotations

import atexit
import contextlib
import json
import os
import secrets
import shutil
import tempfile
import threading
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, ClassVar

from attrs import frozen

from snodo.base.errors import ToolError
from snodo.process.runner import run_process
from snodo.rules.guard import PathGuard
from snodo.sandbox import current_policy
from snodo.workspace.pysetup import DOCS, PythonSetup, python_argv, python_setup

#: ``pytest.ExitCode.NO_TESTS_COLLECTED``, a stable part of pytest's interface: importing
#: pytest to name it would load pytest on every governed run.
NO_TESTS_COLLECTED = 5

PROBE_DIR = Path(__file__).resolve().parent / "pytest_probe"
PROBE_PLUGIN = "snodo_import_probe"
PROBE_MARKER = "snodo-import-report: "
#: Where the probe writes its report (a fresh path each run).
REPORT_ENV = "SNODO_IMPORT_REPORT"

# No cache directory and no bytecode: judging the work must not change the work tree.
DEFAULT_COMMAND = ("python", "-m", "pytest", "-q")
TAIL_LINES = 60
EXCERPT_CHARS = 4000
MAX_FAILED_IDS = 50
# pytest's own order in its closing tally line.
_TALLY_ORDER = ("failed", "passed", "skipped", "deselected", "xfailed", "xpassed", "errors")


@frozen(kw_only=True)
class TestOutput:
    """What the probe reported: the tally, the failed test ids, each error's first lines."""

    __test__: ClassVar[bool] = False  # not a pytest test class, despite the name

    summary: str | None
    failed_tests: tuple[str, ...]
    excerpt: str
    exit_name: str | None = None  # pytest.ExitCode's name for the session's exit status
    errors: tuple[Mapping[str, Any], ...] = ()


def read_test_output(report: Mapping[str, Any] | None, *, excerpt_chars: int = EXCERPT_CHARS) -> TestOutput:
    """Read the probe's report of a pytest session (``None``: pytest never reported)."""
    if not report:
        return TestOutput(summary=None, failed_tests=(), excerpt="")
    errors = tuple({**e, "headline": first_lines(e)} for e in report.get("errors") or () if isinstance(e, dict))
    failed = [str(t) for t in report.get("failed") or () if isinstance(t, str)]
    name = report.get("exitstatus_name")
    return TestOutput(
        summary=_tally(report),
        failed_tests=tuple(dict.fromkeys(failed))[:MAX_FAILED_IDS],
        excerpt=_excerpt(errors, excerpt_chars),
        exit_name=name if isinstance(name, str) else None,
        errors=errors,
    )


def _tally(report: Mapping[str, Any]) -> str:
    """pytest's closing tally, in its order: ``1 failed, 3 passed in 0.12s``."""
    counts = report.get("counts") if isinstance(report.get("counts"), dict) else {}
    assert isinstance(counts, dict)
    summary = ", ".join(f"{counts[k]} {k}" for k in _TALLY_ORDER if isinstance(counts.get(k), int) and counts[k])
    duration = report.get("duration")
    return (summary or "no tests ran") + (f" in {duration:.2f}s" if isinstance(duration, int | float) else "")


def first_lines(error: Mapping[str, Any]) -> str:
    """The line a person needs first: ``ModuleNotFoundError: No module named 'tomli_w'``."""
    return f"{error.get('type') or 'error'}: {error.get('message') or ''}".strip()


def _excerpt(errors: Sequence[Mapping[str, Any]], limit: int) -> str:
    """Each error's headline and pytest's report of it, cut in the middle to ``limit`` characters."""
    text = "\n\n".join(f"{e.get('nodeid')}: {first_lines(e)}\n{e.get('text') or ''}".strip() for e in errors)
    if len(text) <= limit:
        return text
    head, tail = (limit * 3) // 4, limit // 4
    return f"{text[:head]}\n[... {len(text) - head - tail} characters cut ...]\n{text[-tail:]}"


@frozen(kw_only=True)
class SuiteRun:
    """One real test run: its output read, and what the import probe saw (``imports``:
    ``{"checked": n, "foreign": {module: path}}``, ``None`` when the probe did not report).
    ``exit_code`` is ``None`` when the run was killed at the time limit."""

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
    execution_python: Any = None,
) -> SuiteRun:
    """Set up (:func:`~snodo.workspace.pysetup.python_setup`) and run ``command`` in ``workspace``;
    deprecated in :mod:`snodo.api` for ``judge_tests``."""
    setup = python_setup(
        workspace, project_root=project_root, python=python, pythonpath=pythonpath, execution_python=execution_python
    )
    return run_suite(python_argv(command, setup), setup, timeout=timeout)


def run_suite(argv: Sequence[str], setup: PythonSetup, *, timeout: float) -> SuiteRun:
    """Run ``argv`` (already through :func:`python_argv`) in the workspace with the import probe."""
    if timeout <= 0:
        raise ToolError("the test timeout must be positive")
    report_file = _report_path()
    try:
        env = suite_env(setup, str(report_file))
        result = run_process(list(argv), cwd=setup.workspace, timeout=timeout, env=env, sandbox=current_policy())
        imports = _load_report(report_file, result.output)
    finally:
        with contextlib.suppress(OSError):  # none was written (no pytest, or confined away from it)
            os.unlink(report_file)
    return SuiteRun(
        argv=tuple(argv),
        exit_code=result.returncode,
        timed_out=result.timed_out,
        duration=result.duration,
        output=result.output,
        read=read_test_output(imports),
        imports=imports,
        setup=setup,
    )


#: Where the import probe writes its reports: one private directory per process, made on
#: first use and removed at its exit, a file of a random name per test run. (A directory per
#: run would cost a ``mkdir`` and an ``rmdir`` on every ``validate_task``.)
_SCRATCH: dict[int, str] = {}  # pid -> directory (a forked child makes its own)
_SCRATCH_LOCK = threading.Lock()


def _report_path() -> Path:
    with _SCRATCH_LOCK:
        pid = os.getpid()
        where = _SCRATCH.get(pid)
        if where is None or not os.path.isdir(where):
            where = _SCRATCH[pid] = tempfile.mkdtemp(prefix="snodo-tests-")
            atexit.register(_remove_scratch, pid, where)
    return Path(where) / f"imports-{secrets.token_hex(8)}.json"


def _remove_scratch(pid: int, where: str) -> None:
    if os.getpid() == pid:  # not a forked child's, whose parent may still use it
        shutil.rmtree(where, ignore_errors=True)


def suite_env(setup: PythonSetup, report: str) -> dict[str, str]:
    """A test run's environment: snodo's own, the import roots and the probe on the path
    (an inherited ``PYTHONPATH`` dropped), no byte-code, no pytest cache, the probe's settings."""
    env = os.environ.copy()
    env["PYTHONPATH"] = os.pathsep.join([*setup.pythonpath, str(PROBE_DIR)])
    env["PYTHONDONTWRITEBYTECODE"] = "1"
    env["PYTEST_ADDOPTS"] = f"{env.get('PYTEST_ADDOPTS', '')} -p no:cacheprovider -p {PROBE_PLUGIN}".strip()
    env["SNODO_PROJECT_MODULES"] = ",".join(setup.modules)
    env["SNODO_IMPORT_WORKSPACE"] = str(setup.workspace)
    env["SNODO_IMPORT_PROJECT_ROOT"] = "" if setup.project_root == setup.workspace else str(setup.project_root)
    env[REPORT_ENV] = report
    return env


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


def python_settings(validators: Sequence[Any], *, execution_python: str | None = None) -> dict[str, Any]:
    """``python``/``pythonpath`` from the first of ``validators`` whose tooling sets either,
    and ``execution.python``: the MCP ``run_tests`` tool runs tests as the mode's validators do."""
    found: dict[str, Any] = {"execution_python": execution_python}
    for v in validators:
        tooling = getattr(v, "tooling", None) or {}
        if "python" in tooling or "pythonpath" in tooling:
            return {**found, "python": tooling.get("python"), "pythonpath": tooling.get("pythonpath")}
    return found


@frozen(kw_only=True)
class TestRunResult:
    """What a ``run_tests`` call showed: ``passed`` only for exit code 0 within the time limit
    (else ``exit_code`` is ``None``), with the project's modules all imported from the project."""

    __test__: ClassVar[bool] = False  # not a pytest test class, despite the name

    exit_code: int | None
    passed: bool
    summary: str
    output_tail: str
    timed_out: bool
    duration: float
    failed_tests: tuple[str, ...] = ()
    python: str = ""  # the interpreter that ran them, and how it was found


def run_tests(
    root: Path,
    path: str | None = None,
    *,
    timeout: float = 300,
    command: Sequence[str] | None = None,
    python: Any = None,
    pythonpath: Any = None,
    execution_python: Any = None,
) -> TestRunResult:
    """Run the tests of the project at ``root`` (or only ``path``) and summarise them.

    ``command`` replaces :data:`DEFAULT_COMMAND`; ``python``, ``pythonpath`` and
    ``execution_python`` are the protocol's settings (see :func:`python_settings`); ``path``
    comes from the agent and must be inside the root.
    """
    _check_run(root, command, timeout)
    setup = python_setup(
        Path(root), project_root=Path(root), python=python, pythonpath=pythonpath, execution_python=execution_python
    )
    argv = python_argv(command if command is not None else DEFAULT_COMMAND, setup)
    if path is not None:
        if not isinstance(path, str) or path.startswith("-"):
            raise ToolError(f"run_tests path {path!r} is refused: it must be a path, not an option")
        PathGuard(root).check_read(path)
        argv.append(path)
    run = run_suite(argv, setup, timeout=timeout)
    code = run.exit_code
    return TestRunResult(
        exit_code=code,
        passed=code == 0 and not run.timed_out and not run.foreign_imports,
        summary=_summary(run, timeout),
        output_tail=run.tail(TAIL_LINES),
        timed_out=run.timed_out,
        duration=run.duration,
        failed_tests=run.failed_tests,
        python=f"{setup.python} ({setup.python_source})",
    )


def _check_run(root: Path, command: Sequence[str] | None, timeout: float) -> None:
    if command is not None and (
        isinstance(command, str) or not command or not all(isinstance(a, str) and a for a in command)
    ):
        raise ToolError("a test command must be a non-empty list of non-empty strings")
    if timeout <= 0:
        raise ToolError("the test timeout must be positive")
    if not Path(root).is_dir():
        raise ToolError(f"cannot run tests: {root} is not a directory")


def _summary(run: SuiteRun, timeout: float) -> str:
    if run.timed_out:
        return f"timed out after {timeout:g} s; the test run was killed"
    if run.foreign_imports:
        return run.foreign_message()
    if run.exit_code == NO_TESTS_COLLECTED:
        return "no tests collected"
    if run.read.errors:
        return f"{run.read.summary}; {first_lines(run.read.errors[0])}"
    return run.read.summary or f"exit code {run.exit_code}"
