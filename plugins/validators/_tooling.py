"""Strict reading of a validator's ``tooling`` mapping.

It comes from the protocol file: a misspelt key (``comand:``) would otherwise leave the
validator judging with defaults its author did not mean, so unknown keys are a fault that
names them. ``timeout`` is always allowed because the shared runner reads it too.
"""

from __future__ import annotations

from typing import Any

from snodo.api import ValidationRequest, ValidatorFault


def checked(request: ValidationRequest, allowed: tuple[str, ...]) -> dict[str, Any]:
    """The tooling mapping, after refusing keys this validator type does not honour."""
    tooling = dict(request.validator.tooling)
    unknown = sorted(str(k) for k in tooling if k not in (*allowed, "timeout"))
    if unknown:
        vid, vtype = request.validator.validator_id, request.validator.validator_type
        raise ValidatorFault(
            f"validator {vid!r}: unknown tooling key(s) for type {vtype!r}: {', '.join(unknown)}",
            hint=f"the {vtype} validator honours: {', '.join((*allowed, 'timeout'))}",
        )
    return tooling


def timeout(request: ValidationRequest) -> float:
    """``tooling.timeout`` when it is a positive number, else the runner's budget."""
    value = request.validator.tooling.get("timeout")
    if value is None:
        return request.timeout
    if isinstance(value, bool) or not isinstance(value, int | float) or value <= 0:
        raise ValidatorFault(f"validator {request.validator.validator_id!r}: tooling.timeout must be a positive number")
    return float(value)
