"""The one door to a model for the built-in plugins, and the JSON they expect back.

litellm is imported only inside :func:`complete`: ``snodo --help`` and ``snodo run --mock``
must not pay for it. Provider failures become :class:`EnvironmentProblem` naming the model
(and the variable to set when credentials are missing) because a run stopped by a missing
key or an unreachable provider is the operator's to fix, not the work's. Model-judged
validators share :func:`judge`, so every one of them reads verdicts the same strict way:
a reply that is not a well-formed verdict is a fault, never a pass.

``mock_response`` is litellm's own offline switch, passed through for tests and demos: the
provider is not contacted and no credentials are needed.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Mapping, Sequence
from typing import Any

from snodo.api import SEVERITIES, EnvironmentProblem, ValidatorFault, Verdict

_FENCE = re.compile(r"```[A-Za-z]*[ \t]*\n(.*?)```", re.DOTALL)

VERDICT_FORMAT = (
    "Answer with only a JSON object, no other text: "
    '{"severity": "pass" | "warn" | "blocker", "justification": "<one or two sentences>"}. '
    "pass: every criterion is met. warn: you are unsure or something is doubtful; a human "
    "should look. blocker: a criterion is clearly not met."
)


def excerpt(text: str, limit: int = 240) -> str:
    """A short one-line quote of a reply, for error messages that must stay readable."""
    flat = " ".join(text.split())
    return flat if len(flat) <= limit else flat[:limit] + "..."


def _litellm() -> Any:
    """Import litellm without letting it fetch its model cost map over the network.

    A governance engine should not phone home on import, and offline the retries cost
    seconds; a user who wants the live map sets LITELLM_LOCAL_MODEL_COST_MAP=False.
    """
    os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
    import litellm

    litellm.suppress_debug_info = True  # its "Provider List" banners would pollute job logs
    return litellm


def complete(
    *,
    model: str,
    messages: Sequence[Mapping[str, Any]],
    timeout: float,
    tools: Sequence[Mapping[str, Any]] = (),
    temperature: float | None = None,
    api_base: str | None = None,
    api_key_env: str | None = None,
    mock_response: Any = None,
) -> Any:
    """One chat completion; returns litellm's ``ModelResponse``."""
    litellm = _litellm()
    import openai
    from litellm import exceptions as errors

    kwargs: dict[str, Any] = {"model": model, "messages": list(messages), "timeout": timeout}
    if tools:
        kwargs["tools"] = list(tools)
    if temperature is not None:
        kwargs["temperature"] = temperature
    if api_base:
        kwargs["api_base"] = api_base
    if mock_response is not None:
        kwargs["mock_response"] = mock_response
    elif api_key_env:
        key = os.environ.get(api_key_env)
        if not key:
            raise EnvironmentProblem(
                f"no credentials for model {model!r}: {api_key_env} is not set",
                hint=f"export {api_key_env}=<your key> and run again",
            )
        kwargs["api_key"] = key
    try:
        response = litellm.completion(**kwargs)
    except (errors.AuthenticationError, errors.PermissionDeniedError) as exc:
        var = api_key_env or _missing_key(litellm, model)
        raise EnvironmentProblem(
            f"model {model!r} rejected the credentials: {excerpt(str(exc))}",
            hint=f"set {var} to a valid key" if var else "configure the provider's API key",
        ) from exc
    except (
        openai.APIConnectionError,  # litellm's connection errors and timeouts derive from it
        errors.ServiceUnavailableError,
        errors.InternalServerError,
        errors.BadGatewayError,
        errors.RateLimitError,
    ) as exc:
        raise EnvironmentProblem(
            f"model {model!r} is unreachable: {excerpt(str(exc))}",
            hint="check the network, the provider's status and api_base, then run again",
        ) from exc
    except openai.OpenAIError as exc:
        raise EnvironmentProblem(
            f"model {model!r} refused the request: {excerpt(str(exc))}",
            hint="check the model name and its provider prefix (e.g. openai/gpt-4o-mini)",
        ) from exc
    return response


def supports_tools(model: str) -> bool:
    """Whether litellm knows ``model`` to take function calls; unknown models are asked in text."""
    litellm = _litellm()
    try:
        return bool(litellm.supports_function_calling(model=model))
    except Exception:  # litellm raises for models it has no data on: treat as "no"
        return False


def _missing_key(litellm: Any, model: str) -> str | None:
    """The environment variable litellm expects for this model's provider, if it knows."""
    try:
        missing = litellm.validate_environment(model=model).get("missing_keys") or []
    except Exception:  # an unknown provider just means we cannot name the variable
        return None
    return " or ".join(missing) or None


def extract_json(text: str) -> Any:
    """The JSON value in a reply: the whole text, a fenced block, or the outermost braces."""
    candidates = [text.strip(), *(m.strip() for m in _FENCE.findall(text))]
    start, end = text.find("{"), text.rfind("}")
    if 0 <= start < end:
        candidates.append(text[start : end + 1])
    for candidate in candidates:
        try:
            return json.loads(candidate)
        except ValueError:
            continue
    raise ValueError("no JSON value found")


def parse_verdict(text: str | None, *, who: str) -> Verdict:
    """A strict verdict from a model reply; anything malformed raises :class:`ValidatorFault`."""
    if not text or not text.strip():
        raise ValidatorFault(f"{who}: the model returned an empty reply; no verdict")
    try:
        data = extract_json(text)
    except ValueError:
        raise ValidatorFault(f"{who}: the model's reply is not a JSON verdict: {excerpt(text)!r}") from None
    if not isinstance(data, dict):
        raise ValidatorFault(f"{who}: the model's verdict is not a JSON object: {excerpt(text)!r}")
    severity, justification = data.get("severity"), data.get("justification")
    if severity not in SEVERITIES:
        raise ValidatorFault(
            f"{who}: the model's verdict has severity {severity!r}, expected one of {', '.join(SEVERITIES)}"
        )
    if not isinstance(justification, str) or not justification.strip():
        raise ValidatorFault(f"{who}: the model's verdict has no justification")
    return Verdict(severity=severity, justification=justification.strip())


def judge(*, model: str, system: str, prompt: str, timeout: float, who: str, mock_response: Any = None) -> Verdict:
    """Ask ``model`` for a verdict on ``prompt``; raises when no verdict can be read."""
    response = complete(
        model=model,
        messages=[
            {"role": "system", "content": f"{system}\n\n{VERDICT_FORMAT}"},
            {"role": "user", "content": prompt},
        ],
        timeout=timeout,
        mock_response=mock_response,
    )
    return parse_verdict(response.choices[0].message.content, who=who)
