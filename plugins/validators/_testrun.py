"""Running a project's tests for a verdict: no shell, bounded, and leaving no trace.

The pytest validator and the acceptance criterion "tests pass" share this, so both read a
run the same way. pytest's exit codes carry the meaning: 5 (nothing collected) is never a
pass, 2 (interrupted, e.g. a test file that does not import) is a failure of the work,
while 3/4 (pytest's own crash or a bad command line) and a timeout mean no verdict at all.
Byte-code and pytest's cache are switched off so judging never changes the tree.
"""

from __future__ import annotations

import os
import re
import shlex
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from snodo.api import EnvironmentProblem, ValidatorFault, Verdict, run_process

DEFAULT_COMMAND = "python -m pytest -q"
# Without a shell these would reach the program as literal arguments and mean nothing.
_SHELL_TOKENS = frozenset({"&&", "||", "|", ";", ">", ">>", "<", "&", "2>&1", "|&"})
_SUMMARY = re.compile(
    r"\b\d+ (passed|failed|errors?|skipped|xfailed|xpassed|deselected)\b|no tests ran|interrupted",
    re.IGNORECASE,
)


def command_argv(command: Any) -> list[str]:
    """The argv for ``tooling.command`` (string or list); a leading python is this interpreter."""
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
    if argv[0] in ("python", "python3"):
        argv[0] = sys.executable
    return argv


@dataclass(frozen=True, kw_only=True)
class SuiteRun:
    argv: tuple[str, ...]
    exit_code: int | None
    summary: str
    tail: str
    dirty: tuple[str, ...]

    def details(self) -> dict[str, Any]:
        info: dict[str, Any] = {
            "command": shlex.join(self.argv),
            "exit_code": self.exit_code,
            "summary": self.summary,
            "output_tail": self.tail,
        }
        if self.dirty:
            info["dirty_tree"] = list(self.dirty)
        return info


def dirty_tree(workspace: Path) -> tuple[str, ...]:
    """Uncommitted changes before the run (``git status --porcelain``); none without git."""
    try:
        # --no-optional-locks: a plain status may rewrite .git/index, and judging must not write.
        result = run_process(["git", "--no-optional-locks", "status", "--porcelain"], cwd=workspace, timeout=30)
    except EnvironmentProblem:
        return ()
    if result.returncode != 0:
        return ()
    return tuple(line for line in result.output.splitlines() if line.strip())[:50]


def run_tests(workspace: Path, command: Any, timeout: float) -> SuiteRun:
    """Run the test command in ``workspace``; raises when it times out or cannot start."""
    argv = command_argv(command)
    dirty = dirty_tree(workspace)
    env = dict(os.environ)
    env["PYTHONDONTWRITEBYTECODE"] = "1"
    env["PYTEST_ADDOPTS"] = f"{env.get('PYTEST_ADDOPTS', '')} -p no:cacheprovider".strip()
    result = run_process(argv, cwd=workspace, timeout=timeout, env=env)
    if result.timed_out:
        raise ValidatorFault(f"the test command timed out after {timeout:g}s; its process group was killed")
    lines = [line.strip() for line in result.output.splitlines() if line.strip()]
    summary = next((line for line in reversed(lines) if _SUMMARY.search(line)), lines[-1] if lines else "")
    return SuiteRun(
        argv=tuple(argv),
        exit_code=result.returncode,
        summary=summary.strip("= "),
        tail=result.tail(40),
        dirty=dirty,
    )


_NO_MODULE = re.compile(r"No module named \S+")


def verdict(run: SuiteRun) -> Verdict:
    """The verdict a test run supports; raises when the run cannot support one."""
    details = run.details()
    missing = _NO_MODULE.search(run.tail)
    if run.exit_code == 1 and missing and run.tail.count("\n") <= 2:
        # `python -m pytest` without pytest exits 1 too: that is no failing test, it is no run.
        raise ValidatorFault(
            f"the test command could not start: {missing.group(0)}; install it in that interpreter "
            f"({run.argv[0]}) or set tooling.command"
        )
    if run.exit_code == 0:
        return Verdict(severity="pass", justification=f"tests passed: {run.summary}", details=details)
    if run.exit_code == 1:
        return Verdict(severity="blocker", justification=f"tests failed: {run.summary}", details=details)
    if run.exit_code == 2:
        return Verdict(
            severity="blocker",
            justification=f"the test run was interrupted (collection errors): {run.summary}",
            details=details,
        )
    if run.exit_code == 5:
        return Verdict(severity="warn", justification="no tests collected; nothing was verified", details=details)
    raise ValidatorFault(
        f"the test command exited with code {run.exit_code} (internal or usage error), "
        f"so there is no verdict:\n{run.tail}"
    )
