"""What went wrong with one model call, as the operator should read it.

Every failure of :func:`snodo_plugins._model.complete` becomes an
:class:`~snodo.api.EnvironmentProblem` (a run halts with ``environment_error``) with the
provider's own words and a hint: no or rejected credentials (401/403), an unknown model
(404, naming the model and how to list the provider's models), a rate limit (429), a
provider down (5xx), a connection that could not be made (refused, DNS, TLS; named as such,
with the URL), a malformed reply (quoting the first 200 bytes of a body that is not JSON),
a timeout. Rate limits, outages and connection failures are retryable (:class:`Retryable`).
"""

from __future__ import annotations

import json
import re

from snodo.api import EnvironmentProblem

from ._model_access import connection_problem, key_variables
from ._model_settings import ModelSettings, excerpt

BODY_QUOTE = 200  # bytes of a non-JSON body quoted in the message


class Retryable(Exception):
    """A failure worth another attempt while ``max_retries`` and the deadline allow."""

    def __init__(self, problem: EnvironmentProblem) -> None:
        super().__init__(problem.message)
        self.problem = problem


def _status(exc: BaseException) -> str:
    code = getattr(exc, "status_code", None)
    return f" (HTTP {code})" if isinstance(code, int) else ""


def _provider_message(exc: BaseException) -> str:
    """The provider's own words, without litellm's class-name prefixes."""
    text = str(exc)
    for prefix in ("litellm.", "OpenAIException - ", "APIError: ", "Error_str: "):
        text = text.replace(prefix, "")
    text = re.sub(r"^\w+Error: \w+Error: ", "", text)
    text = re.sub(r"^\w+(Error|Timeout): ", "", text)
    return excerpt(text, 300)


def where(settings: ModelSettings) -> str:
    return f" at {settings.api_base}" if settings.api_base else ""


def _chain(exc: BaseException) -> list[BaseException]:
    """``exc`` and everything it was raised from or during, each once."""
    found: list[BaseException] = []
    stack: list[BaseException | None] = [exc]
    while stack:
        current = stack.pop()
        if current is None or any(current is seen for seen in found):
            continue
        found.append(current)
        stack.extend((current.__cause__, current.__context__))
    return found


def _unparsable_body(exc: BaseException) -> str | None:
    """The start of a reply body that was not JSON, when the failure was parsing it."""
    for link in _chain(exc):
        if isinstance(link, json.JSONDecodeError) and isinstance(link.doc, str):
            raw = link.doc.encode("utf-8", "replace")[:BODY_QUOTE]
            return raw.decode("utf-8", "replace")
    return None


def _connection_failure(exc: BaseException) -> bool:
    import httpx  # noqa: PLC0415 the model SDK only once a model call failed
    import openai  # noqa: PLC0415 the model SDK only once a model call failed

    return any(isinstance(link, openai.APIConnectionError | httpx.TransportError) for link in _chain(exc)) and not any(
        isinstance(link, openai.APITimeoutError | httpx.TimeoutException) for link in _chain(exc)
    )


def malformed(settings: ModelSettings, what: str) -> EnvironmentProblem:
    return EnvironmentProblem(
        f"model {settings.model!r}{where(settings)} sent a malformed reply: {what}",
        hint="check that api_base points at an OpenAI-compatible endpoint, or try again",
    )


def timed_out(settings: ModelSettings, budget: float) -> EnvironmentProblem:
    return EnvironmentProblem(
        f"model {settings.model!r}{where(settings)} did not answer within {budget:g}s",
        hint="raise the timeout setting if the model is slow, or check the provider; see docs/providers.md",
    )


def classify(exc: BaseException, settings: ModelSettings, attempts: int) -> EnvironmentProblem | Retryable:
    """One failure of a call, as the operator should read it."""
    from litellm import exceptions as errors  # noqa: PLC0415 litellm only once a model call failed

    model, said = settings.model, _provider_message(exc)
    tries = f" after {attempts} attempt(s)" if attempts > 1 else ""
    key = settings.api_key_env or " or ".join(key_variables(settings.model)) or "the provider's API key variable"
    if isinstance(exc, errors.Timeout):
        return EnvironmentProblem(
            f"model {model!r}{where(settings)} did not answer within the timeout: {said}",
            hint="raise the timeout setting if the model is slow, or check the provider; see docs/providers.md",
        )
    if isinstance(exc, errors.AuthenticationError | errors.PermissionDeniedError):
        if "missing" in said.lower() and ("key" in said.lower() or "credential" in said.lower()):
            return EnvironmentProblem(
                f"no credentials for model {model!r}: {said}",
                hint=f"set {key} (or api_key_env) and run again; see docs/providers.md",
            )
        return EnvironmentProblem(
            f"model {model!r}{where(settings)} rejected the credentials{_status(exc)}: {said}",
            hint=f"check that {key} holds a valid key for this provider; see docs/providers.md",
        )
    if isinstance(exc, errors.NotFoundError):
        listing = f"curl {settings.api_base.rstrip('/')}/models" if settings.api_base else "the provider's model list"
        return EnvironmentProblem(
            f"model {model!r} is unknown to the provider{where(settings)}{_status(exc)}: {said}",
            hint=f"list the models it serves ({listing}) and check the name and its provider prefix "
            "(e.g. openai/gpt-4o-mini); see docs/providers.md",
        )
    if isinstance(exc, errors.RateLimitError):
        return Retryable(
            EnvironmentProblem(
                f"model {model!r} is rate limited by the provider{_status(exc)}{tries}: {said}",
                hint="wait and run again, raise max_retries, or lower execution.max_parallel_jobs",
            )
        )
    body = _unparsable_body(exc)
    if body is not None:
        return EnvironmentProblem(
            f"model {model!r}{where(settings)} sent a malformed reply (not JSON); it began: {body!r}",
            hint="check that api_base points at an OpenAI-compatible endpoint and the provider prefix is right",
        )
    if "missing credentials" in said.lower():  # the openai SDK's own check, surfaced as a 500 by litellm
        return EnvironmentProblem(
            f"no credentials for model {model!r}: {said}",
            hint=f"set {key} (or api_key_env) and run again; see docs/providers.md",
        )
    if _connection_failure(exc):
        target = settings.api_base or "the provider's endpoint"
        return Retryable(
            EnvironmentProblem(
                f"model {model!r}: {connection_problem(exc)} at {target}{tries}",
                hint="check that the model server is running and api_base (host, port, scheme) is right",
            )
        )
    if isinstance(
        exc,
        errors.InternalServerError
        | errors.ServiceUnavailableError
        | errors.BadGatewayError
        | errors.APIConnectionError,
    ):
        return Retryable(
            EnvironmentProblem(
                f"model {model!r}: the provider{where(settings)} is down or unreachable{_status(exc)}{tries}: {said}",
                hint="check the provider's status and api_base, then run again",
            )
        )
    return EnvironmentProblem(
        f"model {model!r} refused the request{_status(exc)}: {said}",
        hint="check the model name, its provider prefix (e.g. openai/gpt-4o-mini) and the settings; "
        "see docs/providers.md",
    )
