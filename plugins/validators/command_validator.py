"""The ``command`` validator: a project's own check, judged by its exit status.

``tooling.command`` (a string split like a shell would, or a list; no shell) runs confined
in the workspace, bounded by ``tooling.timeout``: status 0 is a pass, any other a blocker
showing the output's tail; a command that cannot start or runs out of time is no verdict.
For linters, scanners and scripts — not for tests: an exit status says nothing about which
tests ran, so test suites are judged by the ``pytest`` validator (docs/judging.md).
"""

from __future__ import annotations

import shlex
from collections.abc import Iterator

from snodo.api import (
    Setting,
    TestJudgement,
    ValidationRequest,
    ValidatorFault,
    ValidatorSpec,
    Verdict,
    hookimpl,
    run_process,
)

from . import _tooling

NAME = "command"
SETTINGS = (Setting("command", "command"), "timeout")
TAIL_LINES = 40


@hookimpl
def snodo_validators() -> Iterator[ValidatorSpec]:
    yield ValidatorSpec(
        name=NAME,
        description="runs a project check (tooling.command) confined and judges by its exit status",
        needs_model=False,
        deterministic=True,
        settings=SETTINGS,
    )


@hookimpl
def snodo_validate(name: str, request: ValidationRequest) -> Verdict | None:
    if name != NAME:
        return None
    tooling = _tooling.checked(request, SETTINGS)
    if tooling.get("command") is None:
        raise ValidatorFault("the command validator needs tooling.command")
    argv = TestJudgement.command_argv(tooling["command"])
    timeout = _tooling.timeout(request)
    result = run_process(argv, cwd=request.workspace, timeout=timeout)
    shown = shlex.join(argv)
    details: dict[str, object] = {
        "command": shown,
        "exit_code": result.returncode,
        "output_tail": result.tail(TAIL_LINES),
    }
    dirty = request.status.uncommitted() if request.status is not None else ()
    if dirty:  # what the check saw beyond the last commit
        details["dirty_tree"] = list(dirty)
    if result.timed_out:
        raise ValidatorFault(f"{shown} timed out after {timeout:g}s; its process group was killed")
    if result.returncode is None or result.returncode < 0:
        raise ValidatorFault(f"{shown} was killed (signal {-(result.returncode or 0)}) before it finished")
    if result.returncode == 0:
        return Verdict(severity="pass", justification=f"{shown} exited with status 0", details=details)
    return Verdict(
        severity="blocker",
        justification=f"{shown} exited with status {result.returncode}:\n{result.tail(TAIL_LINES)}",
        details=details,
    )
