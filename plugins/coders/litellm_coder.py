"""The ``litellm`` coder: any model litellm can reach proposes whole-file operations.

The reply is structured: a ``submit_files`` tool call when the model takes function calls
(with read-only ``read_file``/``list_files`` to look at the project first), else a JSON
object in the text. Either way the engine receives validated operations it can filter
before anything is written; the model never touches the tree. Turns and time are bounded.

Settings (``coder_config``): ``model`` (required), ``temperature``, ``max_turns``
(default 8), ``timeout`` (seconds for the whole task; default the engine's), ``api_base``,
``api_key_env`` (the variable holding the key), and ``mock_response`` — for offline tests
and demos only: litellm's canned reply (a string, a response mapping, or a list of them,
one per turn); the provider is not contacted.
"""

from __future__ import annotations

import time
from collections.abc import Iterator, Mapping
from typing import Any

from snodo.api import (
    CoderCapabilities,
    CoderError,
    CoderRequest,
    CoderResult,
    CoderSpec,
    EnvironmentProblem,
    hookimpl,
)

from .._model import complete, excerpt, extract_json, supports_tools
from ._config import CoderConfig
from ._prompt import task_prompt
from ._tools import READ_TOOLS, SUBMIT, answer, parse_operations

SETTINGS = ("model", "temperature", "max_turns", "timeout", "api_base", "api_key_env", "mock_response")
DEFAULT_MAX_TURNS = 8

_ROLE = (
    "You are the coder of a software project whose work is checked by automated validators. "
    "Make the smallest complete change that does the task. Write whole files, with paths "
    "relative to the project root; include tests when the task calls for code."
)
_WITH_TOOLS = "Look at the project with read_file and list_files if you need to, then call submit_files once."
_IN_TEXT = (
    'Reply with only a JSON object: {"files": [{"op": "write", "path": "...", "content": "..."}, '
    '{"op": "delete", "path": "..."}], "summary": "..."}'
)


class LiteLLMCoder:
    """Factory target; refuses an incomplete or misspelt ``coder_config`` before any call."""

    def __init__(self, config: Mapping[str, Any]) -> None:
        cfg = CoderConfig("litellm", config, SETTINGS)
        model = cfg.text("model")
        if model is None:
            raise CoderError(
                "coder 'litellm' has no model to call",
                hint="set coder_config.model in the mode (e.g. openai/gpt-4o-mini), or run with --mock",
            )
        self.model = model
        self.temperature = cfg.number("temperature", positive=False)
        self.max_turns = cfg.integer("max_turns") or DEFAULT_MAX_TURNS
        self.timeout = cfg.number("timeout")
        self.api_base = cfg.text("api_base")
        self.api_key_env = cfg.text("api_key_env")
        self.mock_response = config.get("mock_response")

    def _mock(self, turn: int) -> Any:
        if isinstance(self.mock_response, list):
            return self.mock_response[min(turn, len(self.mock_response) - 1)] if self.mock_response else None
        return self.mock_response

    def generate(self, request: CoderRequest) -> CoderResult:
        tools = (SUBMIT, *READ_TOOLS) if supports_tools(self.model) else ()
        messages: list[dict[str, Any]] = [
            {"role": "system", "content": f"{_ROLE}\n{_WITH_TOOLS if tools else _IN_TEXT}"},
            {"role": "user", "content": task_prompt(request)},
        ]
        budget = self.timeout or request.timeout
        deadline = time.monotonic() + budget
        usage = {"model": self.model, "turns": 0, "prompt_tokens": 0, "completion_tokens": 0}
        for turn in range(self.max_turns):
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise EnvironmentProblem(f"model {self.model!r} timed out after {budget:g}s without submitting files")
            response = complete(
                model=self.model,
                messages=messages,
                timeout=remaining,
                tools=tools,
                temperature=self.temperature,
                api_base=self.api_base,
                api_key_env=self.api_key_env,
                mock_response=self._mock(turn),
            )
            _count(usage, response)
            message = response.choices[0].message
            calls = list(message.tool_calls or ())
            request.log(f"litellm: {self.model} turn {turn + 1}: {len(calls)} tool call(s)")
            submitted = next((c for c in calls if c.function.name == "submit_files"), None)
            if submitted is not None:
                return self._result(_loads(submitted.function.arguments, self.model), usage)
            if not calls:
                return self._result(_loads(message.content, self.model), usage)
            messages.append(_assistant(message.content, calls))
            messages.extend(
                {
                    "role": "tool",
                    "tool_call_id": c.id,
                    "content": answer(request.workspace, c.function.name, c.function.arguments),
                }
                for c in calls
            )
        raise CoderError(
            f"model {self.model!r} submitted no files within {self.max_turns} turns",
            hint="raise coder_config.max_turns or narrow the task",
        )

    def _result(self, data: Any, usage: dict[str, Any]) -> CoderResult:
        try:
            operations, summary = parse_operations(data)
        except CoderError as exc:
            raise CoderError(f"model {self.model!r}: {exc.message}: {excerpt(str(data))!r}") from None
        return CoderResult(operations=operations, summary=summary or f"{len(operations)} operation(s)", usage=usage)


def _loads(text: str | None, model: str) -> Any:
    try:
        return extract_json(text or "")
    except ValueError:
        raise CoderError(
            f"model {model!r} replied without usable file operations: {excerpt(text or '(empty reply)')!r}",
            hint="try again, or a model that follows instructions more closely",
        ) from None


def _assistant(content: str | None, calls: list[Any]) -> dict[str, Any]:
    """The model's tool-calling turn, replayed in the history so the provider sees its own calls."""
    return {
        "role": "assistant",
        "content": content,
        "tool_calls": [
            {
                "id": c.id,
                "type": "function",
                "function": {"name": c.function.name, "arguments": c.function.arguments},
            }
            for c in calls
        ],
    }


def _count(usage: dict[str, Any], response: Any) -> None:
    usage["turns"] += 1
    spent = getattr(response, "usage", None)
    usage["prompt_tokens"] += getattr(spent, "prompt_tokens", 0) or 0
    usage["completion_tokens"] += getattr(spent, "completion_tokens", 0) or 0


@hookimpl
def snodo_coders() -> Iterator[CoderSpec]:
    yield CoderSpec(
        name="litellm",
        description="asks any litellm-supported model for whole-file operations (structured reply)",
        capabilities=CoderCapabilities(
            writes_in_place=False,
            commits_own_changes=False,
            settings=SETTINGS,
            needs_network=True,
            deterministic=False,
        ),
        factory=LiteLLMCoder,
    )
