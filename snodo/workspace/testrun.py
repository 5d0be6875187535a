"""The one home of running a project's Python tests and reading what they showed.

Every test run snodo judges goes through here: the pytest validator and the acceptance
criterion "tests pass" (through :mod:`snodo.api`) and the MCP ``run_tests`` tool. A run

- is set up by :mod:`snodo.workspace.pysetup` (the project's interpreter, its import roots
  first on ``PYTHONPATH``, an inherited ``PYTHONPATH`` dropped);
- loads snodo's probe (a tiny pytest plugin), which reports any of the project's own
  modules imported from outside the workspace (such a run proves nothing and is refused)
  and is the structured reading of the run: counts, failed ids, pytest's exit status and
  each error's exception. Nothing reads pytest's terminal output;
- writes no byte-code and no pytest cache, so judging never changes the tree;
- runs without a shell in its own process group, killed as a group at the time limit.
"""

from __future__ import annotations

import atexit
import contextlib
import json
import os
import re
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
# pytest's closing line ("== 3 passed in 0.12s =="): recognised only to refuse a run the probe missed.
_PYTEST_TALLY = re.compile(r"^=*\s*(?:no tests ran|\d+ \w+(?:, \d+ \w+)*) in [\d.]+s(?: \([\d:]+\))?\s*=*$")
# pytest's own order in its closing tally line.
_TALLY_ORDER = ("failed", "passed", "skipped", "deselected", "xfailed", "xpassed", "errors")


# ---------------------------------------------------------------------- reading


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
    counts = report.get("counts") if isinstance(report.get("counts"), dict) else {}
    assert isinstance(counts, dict)
    parts = [f"{counts[k]} {k}" for k in _TALLY_ORDER if isinstance(counts.get(k), int) and counts[k]]
    summary = ", ".join(parts) if parts else "no tests ran"
    if isinstance(report.get("duration"), int | float):
        summary += f" in {report['duration']:.2f}s"
    errors = tuple({**e, "headline": first_lines(e)} for e in report.get("errors") or () if isinstance(e, dict))
    failed = [str(t) for t in report.get("failed") or () if isinstance(t, str)]
    text = "\n\n".join(f"{e.get('nodeid')}: {first_lines(e)}\n{e.get('text') or ''}".strip() for e in errors)
    name = report.get("exitstatus_name")
    return TestOutput(
        summary=summary,
        failed_tests=tuple(dict.fromkeys(failed))[:MAX_FAILED_IDS],
        excerpt=_cut(text, excerpt_chars),
        exit_name=name if isinstance(name, str) else None,
        errors=errors,
    )


def first_lines(error: Mapping[str, Any]) -> str:
    """The line a person needs first: ``ModuleNotFoundError: No module named 'tomli_w'``."""
    return f"{error.get('type') or 'error'}: {error.get('message') or ''}".strip()


def _cut(text: str, limit: int) -> str:
    if len(text) <= limit:
        return text
    head, tail = (limit * 3) // 4, limit // 4
    return f"{text[:head]}\n[... {len(text) - head - tail} characters cut ...]\n{text[-tail:]}"


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
    def missing_modules(self) -> tuple[str, ...]:
        """Modules the tests could not import that are not the project's own: the environment lacks them."""
        own = set(self.setup.modules)
        found = [str(e["missing"]) for e in self.read.errors if isinstance(e.get("missing"), str)]
        return tuple(dict.fromkeys(m for m in found if m.split(".")[0] not in own))

    @property
    def foreign_imports(self) -> dict[str, str]:
        return dict((self.imports or {}).get("foreign") or {})

    @property
    def failed_tests(self) -> tuple[str, ...]:
        return self.read.failed_tests

    @property
    def pytest_without_probe(self) -> bool:
        """Whether pytest printed its closing tally although the probe never reported: it ran
        behind a wrapper that dropped snodo's environment. Only ever used to refuse a verdict
        (the imports were not checked); results are read from the probe alone."""
        if self.imports is not None:
            return False
        return any(_PYTEST_TALLY.match(line.strip()) for line in self.output.splitlines()[-20:])

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
    """Set up and run ``command`` in ``workspace`` (see the module docstring); the plugins' entry point.

    A leading ``python``/``python3`` in ``command`` is the project's interpreter (``python``,
    else ``execution_python``, else the one found; a relative path resolves against
    ``project_root``), a leading ``pytest`` is ``python -m pytest``.
    Raises :class:`ValidatorFault` for settings that cannot work.
    """
    setup = python_setup(
        workspace, project_root=project_root, python=python, pythonpath=pythonpath, execution_python=execution_python
    )
    return run_suite(python_argv(command, setup), setup, timeout=timeout)


def run_suite(argv: Sequence[str], setup: PythonSetup, *, timeout: float) -> SuiteRun:
    """Run ``argv`` (already through :func:`python_argv`) in the workspace with the import probe."""
    if timeout <= 0:
        raise ToolError("the test timeout must be positive")
    fields = setup_fields(setup)
    report_file = _report_path()
    try:
        env = suite_env(fields, str(report_file))
        policy = current_policy()
        result = run_process(list(argv), cwd=setup.workspace, timeout=timeout, env=env, sandbox=policy)
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


def setup_fields(setup: PythonSetup) -> dict[str, Any]:
    """What :func:`suite_env` makes a test run's environment from."""
    return {
        "python": setup.python,
        "pythonpath": list(setup.pythonpath),
        "modules": list(setup.modules),
        "workspace": str(setup.workspace),
        "project_root": str(setup.project_root),
    }


def suite_env(fields: Mapping[str, Any], report: str) -> dict[str, str]:
    """A test run's environment: snodo's own, the import roots and the probe on the path
    (an inherited ``PYTHONPATH`` dropped), no byte-code, no pytest cache, the probe's settings."""
    env = os.environ.copy()
    env.pop("PYTHONPATH", None)
    env["PYTHONPATH"] = os.pathsep.join([*fields["pythonpath"], str(PROBE_DIR)])
    env["PYTHONDONTWRITEBYTECODE"] = "1"
    env["PYTEST_ADDOPTS"] = f"{env.get('PYTEST_ADDOPTS', '')} -p no:cacheprovider -p {PROBE_PLUGIN}".strip()
    env["SNODO_PROJECT_MODULES"] = ",".join(fields["modules"])
    env["SNODO_IMPORT_WORKSPACE"] = str(fields["workspace"])
    same = fields["project_root"] == fields["workspace"]
    env["SNODO_IMPORT_PROJECT_ROOT"] = "" if same else str(fields["project_root"])
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


# ------------------------------------------------------------ the MCP tool


def python_settings(validators: Sequence[Any], *, execution_python: str | None = None) -> dict[str, Any]:
    """``python``/``pythonpath`` from the first of ``validators`` whose tooling sets either,
    and the protocol's ``execution.python``.

    The MCP ``run_tests`` tool has no tooling of its own: it runs the tests the way the
    mode's test-running validators are configured to.
    """
    found: dict[str, Any] = {"execution_python": execution_python}
    for v in validators:
        tooling = getattr(v, "tooling", None) or {}
        if "python" in tooling or "pythonpath" in tooling:
            return {**found, "python": tooling.get("python"), "pythonpath": tooling.get("pythonpath")}
    return found


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
    if command is not None and (
        isinstance(command, str) or not command or not all(isinstance(a, str) and a for a in command)
    ):
        raise ToolError("a test command must be a non-empty list of non-empty strings")
    if timeout <= 0:
        raise ToolError("the test timeout must be positive")
    if not Path(root).is_dir():
        raise ToolError(f"cannot run tests: {root} is not a directory")
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
    foreign = run.foreign_imports
    if run.timed_out:
        summary = f"timed out after {timeout:g} s; the test run was killed"
    elif foreign:
        summary = run.foreign_message()
    elif code == NO_TESTS_COLLECTED:
        summary = "no tests collected"
    elif run.read.errors:
        summary = f"{run.read.summary}; {first_lines(run.read.errors[0])}"
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
        python=f"{setup.python} ({setup.python_source})",
    )
