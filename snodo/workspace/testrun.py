"""The ``run_tests`` tool: pytest in a child process, bounded and never through a shell.

The child runs in its own process group, so a timeout kills the test suite together with
everything it forked; a hung test cannot outlive the verdict. The agent chooses at most a
path inside the project, never options: an argument that starts with ``-`` is refused.
"""

from __future__ import annotations

import os
import re
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import ClassVar

from attrs import frozen

from snodo.errors import ToolError
from snodo.proc import run_process
from snodo.sandbox import current_policy
from snodo.workspace.guard import PathGuard

# No cache directory and no bytecode: judging the work must not change the work tree.
DEFAULT_COMMAND = (sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider")
NO_TESTS_COLLECTED = 5
TAIL_LINES = 60
# "3 passed, 1 warning in 0.12s", "1 failed, 2 passed in 1.01s", "no tests ran in 0.01s"
_SUMMARY = re.compile(r"^=*\s*((?:no tests ran|\d+ \w+(?:, \d+ \w+)*) in [\d.]+s(?: \([\d:]+\))?)\s*=*$")


@frozen(kw_only=True)
class TestRunResult:
    """What a test run showed: ``passed`` only for exit code 0 within the time limit.

    ``exit_code`` is ``None`` when the run was killed at the time limit.
    """

    __test__: ClassVar[bool] = False  # not a pytest test class, despite the name

    exit_code: int | None
    passed: bool
    summary: str
    output_tail: str
    timed_out: bool
    duration: float


def run_tests(
    root: Path,
    path: str | None = None,
    *,
    timeout: float = 300,
    command: Sequence[str] | None = None,
) -> TestRunResult:
    """Run the tests of the project at ``root`` (or only ``path``) and summarise them.

    ``command`` replaces :data:`DEFAULT_COMMAND` (the protocol's tooling may set it);
    ``path`` comes from the agent and must be a path inside the root.
    """
    argv = list(DEFAULT_COMMAND) if command is None else _command(command)
    if timeout <= 0:
        raise ToolError("the test timeout must be positive")
    if not Path(root).is_dir():
        raise ToolError(f"cannot run tests: {root} is not a directory")
    if path is not None:
        if not isinstance(path, str) or path.startswith("-"):
            raise ToolError(f"run_tests path {path!r} is refused: it must be a path, not an option")
        PathGuard(root).check_read(path)
        argv.append(path)
    env = {**os.environ, "PYTHONDONTWRITEBYTECODE": "1"}
    result = run_process(argv, cwd=Path(root), timeout=timeout, env=env, sandbox=current_policy())
    code = result.returncode
    if result.timed_out:
        summary = f"timed out after {timeout:g} s; the test run was killed"
    elif code == NO_TESTS_COLLECTED:
        summary = "no tests collected"
    else:
        summary = _summary_line(result.output) or f"exit code {code}"
    return TestRunResult(
        exit_code=code,
        passed=code == 0 and not result.timed_out,
        summary=summary,
        output_tail=result.tail(TAIL_LINES),
        timed_out=result.timed_out,
        duration=result.duration,
    )


def _command(command: Sequence[str]) -> list[str]:
    if isinstance(command, str) or not command or not all(isinstance(a, str) and a for a in command):
        raise ToolError("a test command must be a non-empty list of non-empty strings")
    return list(command)


def _summary_line(output: str) -> str | None:
    """pytest's closing tally, the last line that looks like one."""
    for line in reversed(output.splitlines()):
        match = _SUMMARY.match(line.strip())
        if match:
            return match.group(1).strip()
    return None
