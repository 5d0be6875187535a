"""The one door to a model for the built-in plugins: :func:`complete`.

The litellm coder, the model judges and the model-backed planner all call a model through
it, so they share one reading of the provider settings (:mod:`._model_settings`), one
preflight (:mod:`._model_access`) and one classification of what went wrong
(:mod:`._model_errors`): every failure is an :class:`~snodo.api.EnvironmentProblem` with
the provider's own message and a hint. Rate limits, outages and refused connections are
retried ``max_retries`` times (default 1); the openai SDK's and litellm's own hidden retries
are switched off.

``timeout`` is a wall-clock deadline for the whole call, counted from the moment the caller
started (``started``), so every retry and every chunk of a stream are inside it: the request
runs in a worker thread and the caller stops waiting at the deadline (the worker is told to
stop reading and its own read timeout ends it). A slow stream that sends a chunk every 1.9 s
does not outlive ``timeout: 2``. litellm's import and its first call's own set-up (once per
process and model, :func:`prepare`: seconds on a loaded machine) happen before the clock
starts: the timeout bounds the provider, not our start-up, so a short timeout with a hanging
provider still sends its request. Without litellm the call raises
:class:`~._model_settings.ModelStackMissing` naming the extra to install.

Usage is never lost: a reply carries its tokens, cost (when litellm knows the price) and
the number of requests made; a failure carries what was spent up to it on the exception
(:func:`carry_usage`), where the engine reads it for a halted run's ``coder_usage``.

``mock_response`` is litellm's own offline switch, passed through for tests and demos: the
provider is not contacted and no credentials are needed.
"""

from __future__ import annotations

import contextlib
import importlib
import os
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any, TypeVar

from attrs import Factory, frozen

from snodo.api import EnvironmentProblem

from ._model_access import check_credentials
from ._model_errors import Retryable, classify, malformed, timed_out
from ._model_settings import DEFAULT_TIMEOUT, ModelSettings, litellm

RETRY_PAUSE = 1.0
USAGE_KEYS = ("requests", "prompt_tokens", "completion_tokens")

T = TypeVar("T")


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


def carry_usage(exc: BaseException, usage: Mapping[str, Any]) -> None:
    """Attach what a failed call (or coder run) spent to the exception that ends it.

    The engine reads an exception's ``usage`` mapping, when there is one, into the run's
    ``coder_usage``: a halted, timed-out or interrupted run still accounts for its tokens.
    """
    setattr(exc, "usage", dict(usage))  # noqa: B010  (the core's exception classes do not declare it)


def spent_by(exc: BaseException) -> Mapping[str, Any]:
    """The usage an exception carries (empty when none)."""
    usage = getattr(exc, "usage", None)
    return usage if isinstance(usage, Mapping) else {}


def add_usage(total: dict[str, Any], usage: Mapping[str, Any]) -> None:
    """Sum one reply's usage into a running total (cost only when a part has one)."""
    for key in USAGE_KEYS:
        total[key] = int(total.get(key, 0)) + int(usage.get(key, 0) or 0)
    if "cost_usd" in usage:
        total["cost_usd"] = round(float(total.get("cost_usd", 0.0)) + float(usage["cost_usd"]), 8)


class _Late(Exception):
    """The deadline passed while the worker was still busy."""


def within(deadline: float, work: Callable[[threading.Event], T]) -> T:
    """``work(stop)`` in a worker thread, waited for until ``deadline`` (monotonic) at most.

    At the deadline ``stop`` is set (a stream stops reading at its next chunk) and
    :class:`_Late` is raised here; the worker's own read timeout ends it if it is stuck.
    """
    box: dict[str, Any] = {}
    done, stop = threading.Event(), threading.Event()

    def run() -> None:
        try:
            box["value"] = work(stop)
        except BaseException as exc:  # handed to the caller's thread as is
            box["error"] = exc
        finally:
            done.set()

    threading.Thread(target=run, name="snodo-model-call", daemon=True).start()
    if not done.wait(max(0.0, deadline - time.monotonic())):
        stop.set()
        raise _Late
    if "error" in box:
        raise box["error"]
    return box["value"]  # type: ignore[no-any-return]


def complete(
    settings: ModelSettings,
    messages: Sequence[Mapping[str, Any]],
    *,
    tools: Sequence[Mapping[str, Any]] = (),
    timeout: float | None = None,
    mock_response: Any = None,
    log: Callable[[str], None] | None = None,
    started: float | None = None,
) -> Reply:
    """One chat completion, within ``timeout`` (else the settings', else 120 s) of ``started`` (else now)."""
    module = prepare(settings)  # before the clock starts (see the module's docstring)
    begun = time.monotonic() if started is None else started
    budget = timeout or settings.timeout or DEFAULT_TIMEOUT
    deadline = begun + budget
    mock = mock_response if mock_response is not None else settings.mock_response
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
    elif settings.api_key_env:
        kwargs["api_key"] = os.environ.get(settings.api_key_env)
    stream = settings.stream and mock is None
    spent: dict[str, Any] = {key: 0 for key in USAGE_KEYS}
    try:
        return _attempts(module, settings, kwargs, stream, deadline, budget, spent, mock is None, log)
    except BaseException as exc:
        carry_usage(exc, spent)
        raise


def _attempts(
    module: Any,
    settings: ModelSettings,
    kwargs: dict[str, Any],
    stream: bool,
    deadline: float,
    budget: float,
    spent: dict[str, Any],
    check: bool,
    log: Callable[[str], None] | None,
) -> Reply:
    attempt = 0
    while True:
        attempt += 1
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            raise timed_out(settings, budget)

        def work(stop: threading.Event, first: bool = attempt == 1) -> Reply:
            if first and check:
                check_credentials(settings)
            spent["requests"] += 1
            response = _call(module, kwargs, deadline - time.monotonic(), stream, stop)
            return _reply(module, settings, response)

        try:
            reply = within(deadline, work)
        except _Late:
            raise timed_out(settings, budget) from None
        except EnvironmentProblem:
            raise
        except _Malformed as exc:
            raise malformed(settings, str(exc)) from None
        except Exception as exc:
            problem = classify(exc, settings, attempt)
            if isinstance(problem, Retryable):
                pause = min(RETRY_PAUSE * attempt, 10.0)
                if attempt <= settings.max_retries and deadline - time.monotonic() > pause + 1:
                    if log is not None:
                        log(f"model {settings.model}: {problem.problem.message}; retrying")
                    time.sleep(pause)
                    continue
                raise problem.problem from None
            raise problem from None
        add_usage(spent, {**reply.usage, "requests": 0})
        return Reply(content=reply.content, tool_calls=reply.tool_calls, usage={**reply.usage, "requests": attempt})


def _call(module: Any, kwargs: dict[str, Any], remaining: float, stream: bool, stop: threading.Event) -> Any:
    timeout = max(remaining, 0.01)
    if not stream:
        return module.completion(**kwargs, timeout=timeout)
    chunks = []
    for chunk in module.completion(**kwargs, timeout=timeout, stream=True, stream_options={"include_usage": True}):
        if stop.is_set():  # the caller has given up at the deadline: stop reading
            raise _Malformed("abandoned at the deadline")
        chunks.append(chunk)
    # litellm closes any stream with a synthesised "stop"; a real one carries a delta first
    deltas = [getattr(c, "delta", None) for chunk in chunks for c in (getattr(chunk, "choices", None) or ())]
    if not any(d is not None and (d.role is not None or d.content is not None or d.tool_calls) for d in deltas):
        raise _Malformed("the stream ended without a chat completion chunk (is api_base an OpenAI-compatible /v1?)")
    return module.stream_chunk_builder(chunks, messages=kwargs["messages"])


class _Malformed(Exception):
    """A reply that is not a chat completion, found while reading it."""


def _reply(module: Any, settings: ModelSettings, response: Any) -> Reply:
    choices = getattr(response, "choices", None)
    if not choices:
        raise malformed(settings, "no choices in the reply")
    message = getattr(choices[0], "message", None)
    if message is None:
        raise malformed(settings, "the first choice has no message")
    calls = tuple(
        ToolCall(id=str(c.id), name=str(c.function.name), arguments=str(c.function.arguments or ""))
        for c in (getattr(message, "tool_calls", None) or ())
    )
    content = message.content if isinstance(message.content, str) else None
    tokens = getattr(response, "usage", None)
    usage: dict[str, Any] = {
        "prompt_tokens": int(getattr(tokens, "prompt_tokens", 0) or 0),
        "completion_tokens": int(getattr(tokens, "completion_tokens", 0) or 0),
    }
    if settings.mock_response is None:
        try:
            cost = module.completion_cost(completion_response=response, model=settings.model)
        except Exception:  # litellm has no price for this model: leave the cost out
            cost = None
        if isinstance(cost, int | float) and cost > 0:
            usage["cost_usd"] = float(cost)
    return Reply(content=content, tool_calls=calls, usage=usage)


_prepared: set[tuple[str, str | None]] = set()
_preparing = threading.Lock()


def prepare(settings: ModelSettings) -> Any:
    """litellm, imported and ready to send a request to ``settings``' model at once.

    A first call imports much more than ``import litellm`` did: the provider's module, the
    HTTP transport (httpcore, h11), the tokenizer's tables; seconds on a loaded machine. One
    offline call (litellm's ``mock_response``: nothing leaves the process) per model and
    endpoint does it here, ahead of any deadline. Raises
    :class:`~._model_settings.ModelStackMissing` without litellm.
    """
    module = litellm()
    key = (settings.model, settings.api_base)
    with _preparing:
        if key in _prepared:
            return module
        # the openai SDK's transport, and the tokenizer's tables a real request's token count
        # reads (a mock call loads neither); absent in some future litellm: nothing to load then
        for name in ("httpcore", "litellm.litellm_core_utils.default_encoding"):
            with contextlib.suppress(ImportError):
                importlib.import_module(name)
        # a model litellm cannot route fails here too: the real call will say so, classified
        with contextlib.suppress(Exception):
            module.completion(
                model=settings.model,
                messages=[{"role": "user", "content": "ready?"}],
                mock_response="ready",
                **({"api_base": settings.api_base} if settings.api_base else {}),
            )
        _prepared.add(key)
    return module


def supports_tools(model: str) -> bool:
    """Whether litellm knows ``model`` to take function calls; unknown models are asked in text."""
    try:
        return bool(litellm().supports_function_calling(model=model))
    except Exception:  # litellm raises for models it has no data on: treat as "no"
        return False
