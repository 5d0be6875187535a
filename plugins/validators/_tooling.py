"""Strict reading of a validator's ``tooling`` mapping, by the core's one settings rule.

It comes from the protocol file: a misspelt key (``comand:``) or a mistyped value would
otherwise leave the validator judging with defaults its author did not mean. The check is
:func:`snodo.api.check_settings`, the same one ``snodo protocol check`` runs, so the message
is the same whether the protocol was checked first or not.
"""

from __future__ import annotations

from typing import Any

from snodo.api import Setting, ValidationRequest, ValidatorFault


def checked(request: ValidationRequest, allowed: tuple[str, ...]) -> dict[str, Any]:
    """The tooling mapping with declared defaults filled in, after refusing keys this validator
    type does not honour and values of the wrong type."""
    v = request.validator
    problems = Setting.tooling_problems(v.validator_id, v.validator_type, allowed, v.tooling)
    if problems:
        raise ValidatorFault("; ".join(message for _key, message in problems))
    return Setting.with_defaults(allowed, v.tooling)


def timeout(request: ValidationRequest) -> float:
    """``tooling.timeout`` (the protocol loader refused any that is not a positive number), else the runner's budget."""
    value = request.validator.tooling.get("timeout")
    return request.timeout if value is None else float(value)
