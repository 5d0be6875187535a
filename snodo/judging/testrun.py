"""The MCP ``run_tests`` tool: the workspace's tests run by the judge's own :mod:`.session`, summarised."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any, ClassVar

from attrs import frozen

from snodo.base.errors import ToolError
from snodo.rules.guard import PathGuard

from .judge import foreign_message
from .record import first_line
from .session import Outcome, run_session
from .tooling import Options, options_from_command, pytest_tooling

#: ``pytest.ExitCode.NO_TESTS_COLLECTED`` (importing pytest would load it on every governed run).
NO_TESTS_COLLECTED = 5
TAIL_LINES = 60
MAX_FAILED_IDS = 50


def python_settings(validators: Sequence[Any], *, execution_python: str | None = None) -> dict[str, Any]:
    """The validators' interpreter settings and pytest ``plugins``: ``run_tests`` runs tests as they do."""
    found: dict[str, Any] = {"execution_python": execution_python}
    if plugins := pytest_tooling(validators).get("plugins"):
        found["plugins"] = tuple(plugins)
    for v in validators:
        tooling = getattr(v, "tooling", None) or {}
        if "python" in tooling or "pythonpath" in tooling:
            return {**found, "python": tooling.get("python"), "pythonpath": tooling.get("pythonpath")}
    return found


@frozen(kw_only=True)
class TestRunResult:
    """What a ``run_tests`` call showed: ``passed`` only for exit 0 in time, honestly recorded, no foreign import."""

    __test__: ClassVar[bool] = False  # not a pytest test class, despite the name

    exit_code: int | None
    passed: bool
    summary: str
    output_tail: str
    timed_out: bool
    duration: float
    failed_tests: tuple[str, ...] = ()
    python: str = ""  # the interpreter that ran them, and how it was found

    # What the deprecated ``snodo.api.SuiteRun`` offered and a 0.2.0 plugin may still read.
    @property
    def output(self) -> str:
        return self.output_tail

    def tail(self, lines: int = 40) -> str:
        return "\n".join(self.output_tail.splitlines()[-lines:])


def run_tests(
    root: Path,
    path: str | None = None,
    *,
    timeout: float = 300,
    python: Any = None,
    pythonpath: Any = None,
    execution_python: Any = None,
    plugins: Sequence[str] = (),
    options: Sequence[str] = (),
) -> TestRunResult:
    """The tests at ``root`` (or the agent's ``path`` in it), run as the validators run them, summarised."""
    if timeout <= 0:
        raise ToolError("the test timeout must be positive")
    root = Path(root)
    if not root.is_dir():
        raise ToolError(f"cannot run tests: {root} is not a directory")
    setup = Options(python=python, pythonpath=pythonpath, execution_python=execution_python).setup(root, root)
    args = ["-p", "no:cacheprovider", "-q", *[a for p in plugins for a in ("-p", p)], *options, *_path(root, path)]
    outcome = run_session(root, setup, args, timeout=timeout, tail=TAIL_LINES)
    s = outcome.session
    return TestRunResult(
        exit_code=outcome.exit_code,
        passed=s is not None and not s.foreign and outcome.exit_code == 0 and not outcome.timed_out,
        summary=_summary(outcome, timeout, root),
        output_tail=outcome.tail,
        timed_out=outcome.timed_out,
        duration=outcome.duration,
        failed_tests=(*s.failed(), *s.collect_errors)[:MAX_FAILED_IDS] if s else (),
        python=f"{setup.python} ({setup.python_source})",
    )


def _path(root: Path, path: str | None) -> list[str]:
    if path is None:
        return []
    if not isinstance(path, str) or path.startswith("-"):
        raise ToolError(f"run_tests path {path!r} is refused: it must be a path, not an option")
    PathGuard(root).check_read(path)
    return [path]


def _summary(outcome: Outcome, timeout: float, root: Path) -> str:
    s = outcome.session
    if outcome.timed_out:
        return f"timed out after {timeout:g} s; the test run was killed"
    if s is None:
        return outcome.problem
    if s.foreign:
        return foreign_message(s.foreign, root)
    if outcome.exit_code == NO_TESTS_COLLECTED and not s.status:
        return "no tests collected"
    first = next(iter([*s.collect_errors.values(), *s.messages.values()]), None)
    return f"{s.tally()} in {outcome.duration:.2f}s{first_line(first, ';')}"


def run_python_tests(workspace: Path, command: Sequence[str], *, timeout: float, **settings: Any) -> TestRunResult:
    """Deprecated in :mod:`snodo.api` for ``judge_tests``: the pytest ``command`` run by :func:`run_tests`."""
    parsed = options_from_command(command)
    if parsed is None:
        raise ToolError(f"{list(command)!r} does not run pytest")
    settings.pop("project_root", None)
    return run_tests(workspace, timeout=timeout, options=[*parsed[0], *parsed[1]], **settings)
