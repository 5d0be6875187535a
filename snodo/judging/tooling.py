"""What a test validator reads from its ``tooling``: the command it runs, and the settings of
the phase's pytest validator a validator needing test results shares.

Below the judge, whose :class:`~snodo.judging.judge.Judgement` offers both to plugins
(``TestJudgement.command_argv``, ``TestJudgement.pytest_tooling`` in :mod:`snodo.api`).
"""

from __future__ import annotations

import shlex
from collections.abc import Sequence
from typing import Any

from snodo.base.errors import ValidatorFault
from snodo.rules.settings import SHELL_TOKENS

DEFAULT_COMMAND = ("python", "-m", "pytest")


def command_argv(command: Any) -> list[str]:
    """The argv ``tooling.command`` (a string split like a shell would, or a list) names."""
    if command is None:
        return list(DEFAULT_COMMAND)
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
    shell = [a for a in argv if a in SHELL_TOKENS or "$(" in a or "`" in a]
    if shell:
        raise ValidatorFault(
            f"tooling.command is run without a shell, so {', '.join(shell)} would be passed literally",
            hint="put the pipeline in a script and make the command run the script",
        )
    return argv


def pytest_tooling(validators: Sequence[Any]) -> dict[str, Any]:
    """The tooling of the first pytest validator among ``validators``, so a validator that
    needs test results (the acceptance criterion "tests pass") asks for the same judgement
    and shares its run."""
    for v in validators:
        if getattr(v, "validator_type", None) == "pytest":
            return dict(getattr(v, "tooling", {}) or {})
    return {}
