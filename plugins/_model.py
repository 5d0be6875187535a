"""The one door to a model for the built-in plugins, and the JSON they expect back.

The litellm coder, the model judges and the model-backed planner all call a model through
:func:`complete`, so they share one reading of the provider settings, one credentials
check and one classification of what went wrong:

- **no credentials**: the key variable is unset; checked by :func:`check_credentials`
  before anything is spent (the litellm coder calls it from its factory, which the engine
  runs before the pre_execute validation issues a token);
- **rejected credentials** (401/403), **unknown model** (404), **rate limited** (429),
  **provider down** (5xx or no connection), **malformed reply** (a body that is not a chat
  completion, no choices, an empty answer), **timeout**.

Each raises :class:`EnvironmentProblem` (a run halts with ``environment_error``) with the
provider's own message and a hint. Rate limits and provider outages are retried
``max_retries`` times (default 1); the openai SDK's and litellm's own hidden retries are
switched off, and ``timeout`` bounds the whole call, retries included, so the configured
timeout is the real bound.

litellm is imported only inside the functions that call it: ``snodo --help`` and
``snodo run --mock`` must not pay for it. ``mock_response`` is litellm's own offline switch,
passed through for tests and demos: the provider is not contacted and no credentials are
needed.
"""

from __future__ import annotations

import json
import os
import re
import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from attrs import Factory, frozen

from snodo.api import SEVERITIES, EnvironmentProblem, ValidatorFault, Verdict

_FENCE = re.compile(r"```[A-Za-z]*[ \t]*\n(.*?)```", re.DOTALL)

#: The provider settings every model-backed plugin accepts, besides ``model``.
SETTINGS = ("api_base", "api_key_env", "timeout", "max_retries", "temperature", "stream")
DEFAULT_TIMEOUT = 120.0
DEFAULT_MAX_RETRIES = 1
RETRY_PAUSE = 1.0

VERDICT_FORMAT = (
    "Answer with only a JSON object, no other text: "
    '{"severity": "pass" | "warn" | "blocker", "justification": "<one or two sentences>"}. '
    "pass: every criterion is met. warn: you are unsure or something is doubtful; a human "
    "should look. blocker: a criterion is clearly not met."
)


# CSI (colours, cursor), OSC (titles, links), the other two-byte escapes, and C0 controls but tab/newline.
_CONTROL = re.compile(
    r"\x1b\[[0-?]*[ -/]*[@-~]|\x1b\][^\x07\x1b]*(?:\x07|\x1b\\)|\x1b[@-Z\\-_]|[\x00-\x08\x0b-\x1f\x7f]"
)


def strip_control(text: str) -> str:
    """``text`` without terminal control sequences (colours, cursor moves, titles)."""
    return _CONTROL.sub("", text)


def excerpt(text: str, limit: int = 240) -> str:
    """A short one-line quote of a reply (control sequences removed), for readable messages."""
    flat = " ".join(strip_control(text).split())
    return flat if len(flat) <= limit else flat[:limit] + "..."


class SettingsError(ValueError):
    """A provider setting has the wrong type; the caller re-raises it as its own fault."""


@frozen(kw_only=True)
class ModelSettings:
    """How to reach one model: the settings a protocol gives a coder, judge or planner."""

    model: str
    api_base: str | None = None
    api_key_env: str | None = None
    timeout: float | None = None
    max_retries: int = DEFAULT_MAX_RETRIES
    temperature: float | None = None
    stream: bool = False
    mock_response: Any = None

    @classmethod
    def read(cls, model: str, raw: Mapping[str, Any]) -> ModelSettings:
        """Typed settings from a protocol mapping; a wrongly typed value raises :class:`SettingsError`."""

        def text(key: str) -> str | None:
            value = raw.get(key)
            if value is not None and (not isinstance(value, str) or not value.strip()):
                raise SettingsError(f"{key} must be a non-empty string, got {value!r}")
            return value

        def number(key: str, *, positive: bool) -> float | None:
            value = raw.get(key)
            if value is None:
                return None
            if isinstance(value, bool) or not isinstance(value, int | float) or (positive and value <= 0):
                raise SettingsError(f"{key} must be a {'positive ' if positive else ''}number, got {value!r}")
            return float(value)

        retries = raw.get("max_retries", DEFAULT_MAX_RETRIES)
        if isinstance(retries, bool) or not isinstance(retries, int) or retries < 0:
            raise SettingsError(f"max_retries must be a whole number >= 0, got {retries!r}")
        stream = raw.get("stream", False)
        if not isinstance(stream, bool):
            raise SettingsError(f"stream must be true or false, got {stream!r}")
        return cls(
            model=model,
            api_base=text("api_base"),
            api_key_env=text("api_key_env"),
            timeout=number("timeout", positive=True),
            max_retries=retries,
            temperature=number("temperature", positive=False),
            stream=stream,
            mock_response=raw.get("mock_response"),
        )


@frozen(kw_only=True)
class ToolCall:
    id: str
    name: str
    arguments: str


@frozen(kw_only=True)
class Reply:
    """One model answer: its text, its tool calls and what it cost."""

    content: str | None
    tool_calls: tuple[ToolCall, ...] = ()
    usage: Mapping[str, Any] = Factory(dict)


def _litellm() -> Any:
    """Import litellm without letting it fetch its model cost map over the network.

    A governance engine should not phone home on import, and offline the retries cost
    seconds; a user who wants the live map sets LITELLM_LOCAL_MODEL_COST_MAP=False.
    """
    os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
    import litellm

    litellm.suppress_debug_info = True  # its "Provider List" banners would pollute job logs
    return litellm


def _key_variables(settings: ModelSettings) -> list[str]:
    """The variables this model needs that are unset (empty when all is in place)."""
    if settings.mock_response is not None:
        return []
    if settings.api_key_env:
        return [] if os.environ.get(settings.api_key_env) else [settings.api_key_env]
    litellm = _litellm()
    try:
        missing = list(litellm.validate_environment(model=settings.model).get("missing_keys") or [])
    except Exception:  # an unknown provider: litellm cannot say, the call will tell
        return []
    # litellm counts a variable that is set but empty as present; the provider will not
    var = _BLANKABLE.get(_provider(litellm, settings.model) or "")
    if var and var in os.environ and not os.environ[var].strip() and var not in missing:
        missing.append(var)
    if settings.api_base:  # the endpoint is given, so a missing *_API_BASE variable does not matter
        missing = [m for m in missing if not m.endswith(("_API_BASE", "_BASE_URL", "_ENDPOINT"))]
    return missing


_BLANKABLE = {
    "openai": "OPENAI_API_KEY",
    "anthropic": "ANTHROPIC_API_KEY",
    "gemini": "GEMINI_API_KEY",
    "mistral": "MISTRAL_API_KEY",
    "groq": "GROQ_API_KEY",
    "deepseek": "DEEPSEEK_API_KEY",
    "openrouter": "OPENROUTER_API_KEY",
    "cohere": "COHERE_API_KEY",
}


def _provider(litellm: Any, model: str) -> str | None:
    try:
        return str(litellm.get_llm_provider(model=model)[1])
    except Exception:  # not a model litellm can route: no provider to name
        return None


def check_credentials(settings: ModelSettings) -> None:
    """Raise :class:`EnvironmentProblem` naming the unset variable, before any token is spent."""
    missing = _key_variables(settings)
    if missing:
        names = " or ".join(missing)
        raise EnvironmentProblem(
            f"no credentials for model {settings.model!r}: {names} is not set",
            hint=f"export {missing[0]}=<your key> (or set api_key_env to the variable holding it) "
            "and run again; see docs/providers.md",
        )


def _api_key(settings: ModelSettings) -> str | None:
    return os.environ.get(settings.api_key_env) if settings.api_key_env else None


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


def _where(settings: ModelSettings) -> str:
    return f" at {settings.api_base}" if settings.api_base else ""


class _Retryable(Exception):
    def __init__(self, problem: EnvironmentProblem) -> None:
        super().__init__(problem.message)
        self.problem = problem


def _classify(exc: BaseException, settings: ModelSettings, attempts: int) -> EnvironmentProblem | _Retryable:
    """One failure of a call, as the operator should read it."""
    from litellm import exceptions as errors

    model, said = settings.model, _provider_message(exc)
    tries = f" after {attempts} attempt(s)" if attempts > 1 else ""
    key = settings.api_key_env or " or ".join(_missing_for(settings.model)) or "the provider's API key variable"
    if isinstance(exc, errors.Timeout):
        return EnvironmentProblem(
            f"model {model!r}{_where(settings)} did not answer within the timeout: {said}",
            hint="raise the timeout setting if the model is slow, or check the provider; see docs/providers.md",
        )
    if isinstance(exc, errors.AuthenticationError | errors.PermissionDeniedError):
        if "missing" in said.lower() and ("key" in said.lower() or "credential" in said.lower()):
            return EnvironmentProblem(
                f"no credentials for model {model!r}: {said}",
                hint=f"set {key} (or api_key_env) and run again; see docs/providers.md",
            )
        return EnvironmentProblem(
            f"model {model!r}{_where(settings)} rejected the credentials{_status(exc)}: {said}",
            hint=f"check that {key} holds a valid key for this provider; see docs/providers.md",
        )
    if isinstance(exc, errors.NotFoundError):
        return EnvironmentProblem(
            f"model {model!r} is unknown to the provider{_where(settings)}{_status(exc)}: {said}",
            hint="check the model name and its provider prefix (e.g. openai/gpt-4o-mini) and api_base; "
            "see docs/providers.md",
        )
    if isinstance(exc, errors.RateLimitError):
        return _Retryable(
            EnvironmentProblem(
                f"model {model!r} is rate limited by the provider{_status(exc)}{tries}: {said}",
                hint="wait and run again, raise max_retries, or lower execution.max_parallel_jobs",
            )
        )
    if "Received response" in str(exc) and "[200 OK]" in str(exc):  # a 200 whose body was not JSON
        return EnvironmentProblem(
            f"model {model!r}{_where(settings)} sent a malformed reply (not a chat completion): {said}",
            hint="check that api_base points at an OpenAI-compatible endpoint and the provider prefix is right",
        )
    if "missing credentials" in said.lower():  # the openai SDK's own check, surfaced as a 500 by litellm
        return EnvironmentProblem(
            f"no credentials for model {model!r}: {said}",
            hint=f"set {key} (or api_key_env) and run again; see docs/providers.md",
        )
    if isinstance(
        exc,
        errors.InternalServerError
        | errors.ServiceUnavailableError
        | errors.BadGatewayError
        | errors.APIConnectionError,
    ):
        return _Retryable(
            EnvironmentProblem(
                f"model {model!r}: the provider{_where(settings)} is down or unreachable{_status(exc)}{tries}: {said}",
                hint="check the provider's status and api_base, then run again",
            )
        )
    return EnvironmentProblem(
        f"model {model!r} refused the request{_status(exc)}: {said}",
        hint="check the model name, its provider prefix (e.g. openai/gpt-4o-mini) and the settings; "
        "see docs/providers.md",
    )


def _missing_for(model: str) -> list[str]:
    """The key variables litellm expects for the model's provider, set or not."""
    try:
        data = _litellm().validate_environment(model=model)
    except Exception:  # an unknown provider: we cannot name the variable
        return []
    return [k for k in data.get("missing_keys") or [] if k.endswith("_KEY")]


def _malformed(settings: ModelSettings, what: str) -> EnvironmentProblem:
    return EnvironmentProblem(
        f"model {settings.model!r}{_where(settings)} sent a malformed reply: {what}",
        hint="check that api_base points at an OpenAI-compatible endpoint, or try again",
    )


def complete(
    settings: ModelSettings,
    messages: Sequence[Mapping[str, Any]],
    *,
    tools: Sequence[Mapping[str, Any]] = (),
    timeout: float | None = None,
    mock_response: Any = None,
    log: Callable[[str], None] | None = None,
) -> Reply:
    """One chat completion, bounded by ``timeout`` (else the settings', else 120 s) in total."""
    litellm = _litellm()
    mock = mock_response if mock_response is not None else settings.mock_response
    if mock is None:
        check_credentials(settings)
    budget = timeout or settings.timeout or DEFAULT_TIMEOUT
    deadline = time.monotonic() + budget
    kwargs: dict[str, Any] = {
        "model": settings.model,
        "messages": list(messages),
        "max_retries": 0,  # the openai SDK's hidden retries: off, we retry ourselves
        "num_retries": 0,  # litellm's own retries: off too
    }
    if tools:
        kwargs["tools"] = list(tools)
    if settings.temperature is not None:
        kwargs["temperature"] = settings.temperature
    if settings.api_base:
        kwargs["api_base"] = settings.api_base
    if mock is not None:
        kwargs["mock_response"] = mock
    elif (key := _api_key(settings)) is not None:
        kwargs["api_key"] = key
    stream = settings.stream and mock is None
    attempt = 0
    while True:
        attempt += 1
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            raise EnvironmentProblem(
                f"model {settings.model!r}{_where(settings)} did not answer within {budget:g}s",
                hint="raise the timeout setting if the model is slow, or check the provider",
            )
        try:
            response = _call(litellm, kwargs, remaining, stream, deadline)
        except EnvironmentProblem:
            raise
        except _Malformed as exc:
            raise _malformed(settings, str(exc)) from None
        except Exception as exc:
            problem = _classify(exc, settings, attempt)
            if isinstance(problem, _Retryable):
                pause = min(RETRY_PAUSE * attempt, 10.0)
                if attempt <= settings.max_retries and deadline - time.monotonic() > pause + 1:
                    if log is not None:
                        log(f"model {settings.model}: {problem.problem.message}; retrying")
                    time.sleep(pause)
                    continue
                raise problem.problem from None
            raise problem from None
        return _reply(litellm, settings, response, attempt)


def _call(litellm: Any, kwargs: dict[str, Any], remaining: float, stream: bool, deadline: float) -> Any:
    if not stream:
        return litellm.completion(**kwargs, timeout=remaining)
    chunks = []
    for chunk in litellm.completion(**kwargs, timeout=remaining, stream=True, stream_options={"include_usage": True}):
        chunks.append(chunk)
        if time.monotonic() > deadline:
            from litellm import exceptions as errors

            raise errors.Timeout(message="the reply was still streaming at the deadline", model="", llm_provider="")
    # litellm closes any stream with a synthesised "stop"; a real one carries a delta first
    deltas = [getattr(c, "delta", None) for chunk in chunks for c in (getattr(chunk, "choices", None) or ())]
    if not any(d is not None and (d.role is not None or d.content is not None or d.tool_calls) for d in deltas):
        raise _Malformed("the stream ended without a finished chat completion")
    return litellm.stream_chunk_builder(chunks, messages=kwargs["messages"])


class _Malformed(Exception):
    """A reply that is not a chat completion, found while reading it."""


def _reply(litellm: Any, settings: ModelSettings, response: Any, attempts: int) -> Reply:
    choices = getattr(response, "choices", None)
    if not choices:
        raise _malformed(settings, "no choices in the reply")
    message = getattr(choices[0], "message", None)
    if message is None:
        raise _malformed(settings, "the first choice has no message")
    calls = tuple(
        ToolCall(id=str(c.id), name=str(c.function.name), arguments=str(c.function.arguments or ""))
        for c in (getattr(message, "tool_calls", None) or ())
    )
    content = message.content if isinstance(message.content, str) else None
    spent = getattr(response, "usage", None)
    usage: dict[str, Any] = {
        "requests": attempts,
        "prompt_tokens": int(getattr(spent, "prompt_tokens", 0) or 0),
        "completion_tokens": int(getattr(spent, "completion_tokens", 0) or 0),
    }
    if settings.mock_response is None:
        try:
            cost = litellm.completion_cost(completion_response=response, model=settings.model)
        except Exception:  # litellm has no price for this model: leave the cost out
            cost = None
        if isinstance(cost, int | float) and cost > 0:
            usage["cost_usd"] = float(cost)
    return Reply(content=content, tool_calls=calls, usage=usage)


def add_usage(total: dict[str, Any], usage: Mapping[str, Any]) -> None:
    """Sum one reply's usage into a running total (cost only when every part has one)."""
    for key in ("requests", "prompt_tokens", "completion_tokens"):
        total[key] = int(total.get(key, 0)) + int(usage.get(key, 0))
    if "cost_usd" in usage:
        total["cost_usd"] = round(float(total.get("cost_usd", 0.0)) + float(usage["cost_usd"]), 8)


def supports_tools(model: str) -> bool:
    """Whether litellm knows ``model`` to take function calls; unknown models are asked in text."""
    litellm = _litellm()
    try:
        return bool(litellm.supports_function_calling(model=model))
    except Exception:  # litellm raises for models it has no data on: treat as "no"
        return False


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


def judge(
    *,
    model: str,
    system: str,
    prompt: str,
    timeout: float,
    who: str,
    mock_response: Any = None,
    settings: ModelSettings | None = None,
) -> Verdict:
    """Ask ``model`` for a verdict on ``prompt``; raises when no verdict can be read.

    ``settings`` carries the judge's provider settings (``api_base``, ``api_key_env``...);
    without it the model is reached through litellm's defaults for its provider.
    """
    reached = settings or ModelSettings(model=model)
    reply = complete(
        reached,
        [
            {"role": "system", "content": f"{system}\n\n{VERDICT_FORMAT}"},
            {"role": "user", "content": prompt},
        ],
        timeout=timeout,
        mock_response=mock_response,
    )
    verdict = parse_verdict(reply.content, who=who)
    return Verdict(severity=verdict.severity, justification=verdict.justification, details={"usage": dict(reply.usage)})
