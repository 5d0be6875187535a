"""The ``llm`` validator: a model judges the task against the validator's criteria.

For concerns no mechanical check covers (security, conventions, design). It sees the spec,
the phase and, after the work, the changed files (bounded). Without ``validator.model``
it raises rather than pass: a governance check that did not run must never look like one
that passed. A malformed verdict or a provider failure raises too, for the same reason.

Tooling: the provider settings every model plugin shares (``api_base``, ``api_key_env``,
``timeout``, ``max_retries``, ``temperature``, ``stream``; docs/providers.md), and
``mock_response`` — for offline tests and demos only: litellm's canned reply; the provider is
not contacted. The model's token usage (and cost, where litellm knows the price) is in the
verdict's details.
"""

from __future__ import annotations

from collections.abc import Iterator

from snodo.api import ValidationRequest, Validator, ValidatorFault, ValidatorSpec, Verdict, hookimpl

from .. import _files
from . import _judging, _tooling

NAME = "llm"
SETTINGS = _judging.JUDGE_SETTINGS
DEFAULT_CRITERION = "the work does what the task asks, correctly and without obvious risk"

_SYSTEM = (
    "You are a strict reviewer in a governed software workflow. Judge the task against the "
    "criteria given, and nothing else."
)


@hookimpl
def snodo_validators() -> Iterator[ValidatorSpec]:
    yield ValidatorSpec(
        name=NAME,
        description="a model judges the task against the validator's criteria (needs `model`)",
        runs_code=False,
        needs_model=True,
        deterministic=False,
        settings=SETTINGS,
    )


def prompt(request: ValidationRequest) -> str:
    criteria = request.validator.criteria or (DEFAULT_CRITERION,)
    parts = [
        f"Phase: {request.phase} ("
        + (
            "the work is done; judge the changed files"
            if request.phase == "post_execute"
            else "nothing has been done yet; judge the task itself"
        )
        + ")",
        "Criteria:\n" + "\n".join(f"- {c}" for c in criteria),
        f"Task:\n{request.task_spec.strip()}",
    ]
    if request.phase == "post_execute":
        parts.append("Changed files:\n" + _files.changed_contents(request.workspace, request.changed_files))
    return "\n\n".join(parts)


@hookimpl
def snodo_validate(name: str, request: ValidationRequest) -> Verdict | None:
    if name != NAME:
        return None
    tooling = _tooling.checked(request, SETTINGS)
    vid = request.validator.validator_id
    model = request.validator.model
    if model is None:
        raise ValidatorFault(
            f"no model configured for validator {vid!r} (type llm); it cannot judge without one",
            hint=f"set `model:` on validator {vid!r} in the protocol (e.g. openai/gpt-4o-mini)",
        )
    verdict = _judging.judge(request, tooling, system=_SYSTEM, prompt=prompt(request))
    return Verdict(
        severity=verdict.severity,
        justification=verdict.justification,
        details={
            "model": model,
            "phase": request.phase,
            "criteria": list(request.validator.criteria),
            **verdict.details,
        },
    )


@hookimpl
def snodo_preflight(validators: tuple[Validator, ...]) -> None:
    _judging.preflight(validators, NAME)
