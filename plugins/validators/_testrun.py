"""A verdict from the project's own tests: no shell, bounded, judging the workspace's code.

The pytest validator and the acceptance criterion "tests pass" share this, so both read a
run the same way. The run itself (interpreter, import roots, probe) is snodo's one
test-run reader, :func:`snodo.api.run_python_tests`; this module turns ``tooling`` into a
command and a run into a verdict. The interpreter is ``tooling.python``, else the
protocol's ``execution.python``, else the project's environment as snodo finds it.

pytest's own exit codes (``pytest.ExitCode``, as the probe reports them) carry the
meaning: ``NO_TESTS_COLLECTED`` is never a pass, ``INTERRUPTED`` (a test file that does
not import) is a failure of the work, unless what failed to import is not the project's
own code: then the environment lacks a dependency, and that is no verdict at all, like
``INTERNAL_ERROR``/``USAGE_ERROR`` (pytest's own crash, a broken conftest or a bad command
line), a signal and a timeout. A run that imported the project's own code from outside
the workspace proves nothing and is no verdict either.
"""

from __future__ import annotations

import enum
import re
import shlex
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from snodo.api import (
    Setting,
    SuiteRun,
    ValidationRequest,
    ValidatorFault,
    Verdict,
    run_python_tests,
)

from . import _tooling

DEFAULT_COMMAND = "python -m pytest -q"
SETTINGS = ("command", Setting("python", "text"), "pythonpath")
DOCS = "docs/validators.md"
# Without a shell these would reach the program as literal arguments and mean nothing.
_SHELL_TOKENS = frozenset({"&&", "||", "|", ";", ">", ">>", "<", "&", "2>&1", "|&"})
_NO_MODULE = re.compile(r"No module named \S+")
_PYTEST_EXIT = {3: "pytest hit an internal error", 4: "pytest could not start the run (usage or conftest error)"}
_SETTING_HINT = "set execution.python in .snodo/protocol.yml (or tooling.python for this validator)"


class ExitCode(enum.IntEnum):
    """``pytest.ExitCode``'s values (a stable part of pytest's interface), named here because
    importing pytest for them cost ~0.3 s on every governed run (#26); a test pins them."""

    OK = 0
    TESTS_FAILED = 1
    INTERRUPTED = 2
    INTERNAL_ERROR = 3
    USAGE_ERROR = 4
    NO_TESTS_COLLECTED = 5


def command_argv(command: Any) -> list[str]:
    """The argv for ``tooling.command`` (string or list); a leading python is resolved later."""
    if command is None:
        command = DEFAULT_COMMAND
    if isinstance(command, str):
        try:
            argv = shlex.split(command)
        except ValueError as exc:
            raise ValidatorFault(f"tooling.command {command!r} cannot be parsed: {exc}") from None
    elif isinstance(command, list | tuple) and all(isinstance(a, str) for a in command):
        argv = list(command)
    else:
        raise ValidatorFault("tooling.command must be a string or a list of strings")
    if not argv:
        raise ValidatorFault("tooling.command is empty")
    shell = [a for a in argv if a in _SHELL_TOKENS or "$(" in a or "`" in a]
    if shell:
        raise ValidatorFault(
            f"tooling.command is run without a shell, so {', '.join(shell)} would be passed literally",
            hint="put the pipeline in a script and make the command run the script",
        )
    return argv


def dirty_tree(request: ValidationRequest) -> tuple[str, ...]:
    """Uncommitted changes before the run, as snodo's runner read them for the whole phase
    (one git for all its validators, none here); none when the request came from elsewhere."""
    return request.status.uncommitted() if request.status is not None else ()


def run_for(request: ValidationRequest, tooling: dict[str, Any]) -> SuiteRun:
    """Run the tests ``tooling`` describes in the request's workspace."""
    timeout = _tooling.timeout(request)
    run = run_python_tests(
        request.workspace,
        command_argv(tooling.get("command")),
        timeout=timeout,
        project_root=request.project_root,
        python=tooling.get("python"),
        pythonpath=tooling.get("pythonpath"),
        execution_python=request.protocol.execution.python,
    )
    if run.timed_out:
        raise ValidatorFault(f"the test command timed out after {timeout:g}s; its process group was killed")
    return run


def details(run: SuiteRun, dirty: tuple[str, ...] = ()) -> dict[str, Any]:
    info: dict[str, Any] = {
        "command": shlex.join(run.argv),
        "exit_code": run.exit_code,
        "summary": run.read.summary or "",
        "failed_tests": list(run.failed_tests),
        "output_excerpt": run.read.excerpt,
        "output_tail": run.tail(40),
        "python": run.setup.python,
        "python_source": run.setup.python_source,
        "pythonpath": list(run.setup.pythonpath),
        "imports_checked": run.imports is not None,
    }
    if dirty:
        info["dirty_tree"] = list(dirty)
    return info


def _named(failed: tuple[str, ...]) -> str:
    if not failed:
        return ""
    shown = ", ".join(failed[:5]) + (f" and {len(failed) - 5} more" if len(failed) > 5 else "")
    return f" ({shown})"


def runs_pytest(argv: tuple[str, ...]) -> bool:
    """Whether the command itself is pytest (``python -m pytest``, ``pytest``, ``py.test``)."""
    return any(a in ("pytest", "py.test") or Path(a).name in ("pytest", "py.test") for a in argv[:3])


def _interpreter(run: SuiteRun) -> str:
    return f"{run.setup.python} ({run.setup.python_source})"


def _shown_errors(errors: tuple[Mapping[str, Any], ...]) -> str:
    """The first relevant line of each error, with where it happened."""
    lines = [f"{e.get('nodeid')}: {e.get('headline')}" for e in errors[:3]]
    more = f"\n... and {len(errors) - 3} more" if len(errors) > 3 else ""
    return "\n".join(lines) + more


def verdict(run: SuiteRun, dirty: tuple[str, ...] = ()) -> Verdict:
    """The verdict a test run supports; raises when the run cannot support one."""
    info = details(run, dirty)
    summary, tail, code = run.read.summary, run.tail(40), run.exit_code
    if code is None or code < 0:
        raise ValidatorFault(
            f"the test command was killed (signal {-(code or 0)}) before it reported, so there is no verdict:\n{tail}"
        )
    if run.imports is None:
        return _unprobed(run, info)
    if run.foreign_imports:
        raise ValidatorFault(run.foreign_message())
    failed, errors = run.failed_tests, run.read.errors
    tally = summary or f"pytest printed no summary, exit status {code}"
    if run.missing_modules:
        raise ValidatorFault(
            f"the tests could not be run: they import {', '.join(run.missing_modules)}, which the interpreter "
            f"{_interpreter(run)} does not have, so there is no verdict on the work:\n{_shown_errors(errors)}",
            hint=f"install it in that environment, or {_SETTING_HINT}; see {DOCS}",
        )
    if code == ExitCode.OK:
        return Verdict(severity="pass", justification=f"tests passed: {tally}", details=info)
    if code == ExitCode.TESTS_FAILED:
        shown = f"\n{_shown_errors(errors)}" if errors else ""
        return Verdict(severity="blocker", justification=f"tests failed: {tally}{_named(failed)}{shown}", details=info)
    if code == ExitCode.INTERRUPTED:
        return Verdict(
            severity="blocker",
            justification=f"the tests could not be collected: {tally}{_named(failed)}\n{_shown_errors(errors)}",
            details=info,
        )
    if code == ExitCode.NO_TESTS_COLLECTED:
        return Verdict(severity="warn", justification="no tests collected; nothing was verified", details=info)
    raise ValidatorFault(
        f"{_PYTEST_EXIT.get(code, 'the test command failed')} (exit code {code}), so there is no verdict; fix what "
        f"the output says, then validate again:\n{tail}",
        hint=f"the tests ran with {_interpreter(run)}; if that is the wrong one, {_SETTING_HINT}",
    )


def _unprobed(run: SuiteRun, info: dict[str, Any]) -> Verdict:
    """A run snodo's import probe did not report on: a verdict only for a command that is not pytest."""
    tail, code = run.tail(40), run.exit_code
    missing = _NO_MODULE.search(tail)
    if missing and not run.pytest_without_probe:
        # `python -m pytest` without pytest exits 1 too: that is no failing test, it is no run.
        raise ValidatorFault(
            f"the test command could not start: {missing.group(0)}; install it in that interpreter "
            f"({_interpreter(run)}), or {_SETTING_HINT} (see {DOCS})"
        )
    if runs_pytest(run.argv):
        what = _PYTEST_EXIT.get(code or 0, "pytest ended before reporting")
        raise ValidatorFault(
            f"{what} (exit code {code}) and never reached the end of the session, so there is no verdict; "
            f"fix what the output says (often conftest.py, a plugin option or a crash while importing), then "
            f"validate again:\n{tail}",
            hint=f"the tests ran with {_interpreter(run)}; if that is the wrong one, {_SETTING_HINT}",
        )
    if run.pytest_without_probe:
        raise ValidatorFault(
            "the test command ran pytest without snodo's import probe, so it cannot be shown that the tests "
            "imported this workspace's code: run pytest directly (python -m pytest, with tooling.python naming "
            f"the interpreter) rather than through a wrapper that drops the environment (see {DOCS})"
        )
    # Not a pytest run: the exit status is all there is.
    if code == 0:
        return Verdict(
            severity="pass",
            justification=f"the test command exited with status 0 (not pytest; no test summary): {info['command']}",
            details=info,
        )
    return Verdict(
        severity="blocker",
        justification=f"the test command exited with status {code} (not pytest; no test summary)",
        details=info,
    )
