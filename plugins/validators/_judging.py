"""The model side of the judges (``llm``, ``acceptance``, ``protocol``): settings and preflight.

A judge's ``model`` is its validator's ``model`` field; the provider settings
(:data:`~snodo_plugins._model_settings.PROVIDER_SETTINGS`: ``api_base``, ``api_key_env``,
``timeout``, ``max_retries``, ``temperature``, ``stream``) come from its ``tooling``, so
each judge can reach its own endpoint with its own key (docs/providers.md).
"""

from __future__ import annotations

import contextlib
from collections.abc import Mapping
from typing import Any

from snodo.api import EnvironmentProblem, ValidationRequest, Validator, ValidatorFault, Verdict

from .. import _model, _model_access, _verdicts
from .._model_settings import MOCK, PROVIDER_SETTINGS, ModelSettings, ModelStackMissing, SettingsError
from . import _tooling

#: The ``tooling`` keys every judge accepts for its model.
JUDGE_SETTINGS = (*PROVIDER_SETTINGS, MOCK)


def settings(validator: Validator, tooling: Mapping[str, Any]) -> ModelSettings | None:
    """The judge's model settings (None without ``model``); a mistyped value is a fault."""
    if validator.model is None:
        return None
    try:
        return ModelSettings.read(validator.model, tooling)
    except SettingsError as exc:
        raise ValidatorFault(f"validator {validator.validator_id!r}: tooling.{exc}") from None


def judge(request: ValidationRequest, tooling: Mapping[str, Any], *, system: str, prompt: str) -> Verdict:
    """One verdict from the validator's model, bounded by its ``timeout`` (its details hold ``usage``)."""
    reached = settings(request.validator, tooling)
    if reached is None:
        raise ValidatorFault(f"validator {request.validator.validator_id!r} has no model to judge with")
    who = f"validator {request.validator.validator_id!r}"
    try:
        return _verdicts.judge(
            settings=reached, system=system, prompt=prompt, timeout=_tooling.timeout(request), who=who
        )
    except ModelStackMissing as exc:  # a judge that could not run is an error, never a pass
        raise ValidatorFault(f"{who} cannot judge: {exc.message}", hint=exc.hint) from None


def preflight(validators: tuple[Validator, ...], vtype: str) -> None:
    """Credentials and endpoint of every validator of type ``vtype`` that names a model, and
    litellm made ready for it: a run's judges then spend their ``timeout`` on the model, not on
    importing litellm inside the runner's bound."""
    for v in validators:
        if v.validator_type != vtype:
            continue
        try:
            found = settings(v, v.tooling)
        except ValidatorFault as exc:
            raise EnvironmentProblem(exc.message) from None
        if found is not None:
            _model_access.preflight(found, who=f"validator {v.validator_id!r}: ")
            with contextlib.suppress(ModelStackMissing):  # the judge reports it itself, as validator_error
                _model.prepare(found)
