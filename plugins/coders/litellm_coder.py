"""The ``litellm`` coder: any model litellm can reach proposes whole-file operations.

The reply is structured: a ``submit_files`` tool call when the model takes function calls
(with read-only ``read_file``/``list_files`` to look at the project first), else a JSON
object in the text, where ``{"read": [paths]}`` / ``{"list": dir}`` is the same read step.
Models asked in text also get the files the task names in the prompt (bounded), so they
see what they edit. Either way the engine receives validated operations it can filter
before anything is written; the model never touches the tree. Turns and time are bounded.

Settings (``coder_config``): ``model`` (required), ``max_turns`` (default 8), ``timeout``
(seconds for the whole task; default the engine's), the provider settings every model
plugin shares (``api_base``, ``api_key_env``, ``max_retries``, ``temperature``, ``stream``:
docs/providers.md), and ``mock_response`` — for offline tests and demos only:
litellm's canned reply (a string, a response mapping, or a list of them, one per turn);
the provider is not contacted. Its preflight checks the settings, the credentials and the
endpoint, so a missing key or a dead ``api_base`` stops the run before any token is spent.
``timeout`` is a wall-clock deadline from the start of :meth:`LiteLLMCoder.generate`; what
the turns spent is reported even when the run fails (on the exception, for the engine).
litellm is imported and prepared for the model when the coder is made (at the preflight), so
its start-up, seconds on a loaded machine, is never counted against ``timeout``; without it
(the base install has no model stack) the coder is refused with ``environment_error`` naming
the extra to install.
"""

from __future__ import annotations

import json
import re
import time
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

from snodo.api import (
    CoderCapabilities,
    CoderError,
    CoderRequest,
    CoderResult,
    CoderSpec,
    EnvironmentProblem,
    Setting,
    hookimpl,
)

from .. import _model, _model_access
from .._files import read_text
from .._model import supports_tools
from .._model_settings import MOCK, MODEL_SETTINGS, ModelSettings, SettingsError, excerpt
from .._verdicts import extract_json
from ..planner import snodo_planner  # noqa: F401  (registers the model-backed planner with this plugin)
from ._config import CoderConfig
from ._prompt import task_prompt
from ._tools import READ_TOOLS, SUBMIT, answer, parse_operations

SETTINGS = (*MODEL_SETTINGS, Setting("max_turns", "integer"), MOCK)
DEFAULT_MAX_TURNS = 8
NAMED_FILES_BUDGET = 40_000  # characters of named files put into a text-only prompt
NAMED_FILES_MAX = 12

_ROLE = (
    "You are the coder of a software project whose work is checked by automated validators. "
    "Make the smallest complete change that does the task. Write whole files, with paths "
    "relative to the project root; include tests when the task calls for code."
)
_WITH_TOOLS = "Look at the project with read_file and list_files if you need to, then call submit_files once."
_IN_TEXT = (
    "Reply with only a JSON object, no other text. To hand in your work: "
    '{"files": [{"op": "write", "path": "...", "content": "<the whole file>"}, '
    '{"op": "delete", "path": "..."}], "summary": "..."}. To look at the project first, reply '
    '{"read": ["path", ...]} to get files\' contents or {"list": "dir"} to list files; you get '
    "the answer and reply again. Every write replaces the whole file, so read a file before "
    "changing it."
)
_PATHLIKE = re.compile(r"[\w./-]*\w\.[A-Za-z0-9]{1,8}\b|[\w.-]+/[\w./-]*\w")


class LiteLLMCoder:
    """One ``coder_config`` read strictly: an incomplete or misspelt one is refused on
    construction, which :func:`snodo_preflight` does before any token is spent."""

    def __init__(self, config: Mapping[str, Any]) -> None:
        cfg = CoderConfig("litellm", config, SETTINGS)
        model = cfg.text("model")
        if model is None:
            raise CoderError(
                "coder 'litellm' has no model to call",
                hint="set coder_config.model in the mode (e.g. openai/gpt-4o-mini), or run with --mock",
            )
        try:
            self.settings = ModelSettings.read(model, config)
        except SettingsError as exc:
            raise CoderError(f"coder 'litellm': coder_config.{exc}") from None
        self.model = model
        self.max_turns = cfg.integer("max_turns") or DEFAULT_MAX_TURNS
        self.timeout = self.settings.timeout
        self.mock_response = config.get("mock_response")
        # Before any deadline runs: without litellm this raises, naming the extra to install.
        _model.prepare(self.settings)
        # Before any token exists: a missing key is the operator's to fix, named here.
        _model_access.check_credentials(self.settings)

    def _mock(self, turn: int) -> Any:
        if isinstance(self.mock_response, list):
            return self.mock_response[min(turn, len(self.mock_response) - 1)] if self.mock_response else None
        return self.mock_response

    def generate(self, request: CoderRequest) -> CoderResult:
        started = time.monotonic()  # litellm is prepared already (in __init__): the deadline is the model's
        usage: dict[str, Any] = {"model": self.model, "turns": 0, "requests": 0, "prompt_tokens": 0}
        usage["completion_tokens"] = 0
        try:
            return self._turns(request, started, usage)
        except BaseException as exc:  # what the turns spent is still the run's: carried to the engine
            _model.add_usage(usage, _model.spent_by(exc))
            _model.carry_usage(exc, usage)
            raise

    def _turns(self, request: CoderRequest, started: float, usage: dict[str, Any]) -> CoderResult:
        tools = (SUBMIT, *READ_TOOLS) if supports_tools(self.model) else ()
        prompt = task_prompt(request)
        if not tools:
            prompt += named_files(request.workspace, request.spec)
        messages: list[dict[str, Any]] = [
            {"role": "system", "content": f"{_ROLE}\n{_WITH_TOOLS if tools else _IN_TEXT}"},
            {"role": "user", "content": prompt},
        ]
        budget = self.timeout or request.timeout
        deadline = started + budget
        for turn in range(self.max_turns):
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise EnvironmentProblem(f"model {self.model!r} timed out after {budget:g}s without submitting files")
            reply = _model.complete(
                self.settings,
                messages,
                tools=tools,
                timeout=remaining,
                mock_response=self._mock(turn),
                log=request.log,
                started=time.monotonic(),
            )
            usage["turns"] += 1
            _model.add_usage(usage, reply.usage)
            calls = list(reply.tool_calls)
            request.log(f"litellm: {self.model} turn {turn + 1}: {len(calls)} tool call(s)")
            submitted = next((c for c in calls if c.name == "submit_files"), None)
            if submitted is not None:
                return self._result(_loads(submitted.arguments, self.model), usage)
            if calls:
                messages.append(_assistant(reply.content, calls))
                messages.extend(
                    {"role": "tool", "tool_call_id": c.id, "content": answer(request.workspace, c.name, c.arguments)}
                    for c in calls
                )
                continue
            data = _loads(reply.content, self.model)
            looked = _read_step(request.workspace, data)
            if looked is None:
                return self._result(data, usage)
            messages.append({"role": "assistant", "content": reply.content or ""})
            messages.append({"role": "user", "content": looked})
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


def named_files(workspace: Path, spec: str) -> str:
    """The project files the task names, as labelled blocks (bounded), for text-only models."""
    blocks: list[str] = []
    left = NAMED_FILES_BUDGET
    seen: set[str] = set()
    for match in _PATHLIKE.finditer(spec):
        rel = match.group(0).strip("./") if match.group(0).startswith("./") else match.group(0).rstrip(".")
        if rel in seen or rel.split("/")[0] in (".snodo", ".git") or len(seen) >= NAMED_FILES_MAX or left <= 0:
            continue
        seen.add(rel)
        text = read_text(workspace, rel, left)
        if text is not None:
            blocks.append(f"--- {rel}\n{text}")
            left -= len(text)
    if not blocks:
        return ""
    return "\n\nCurrent contents of the files the task names:\n" + "\n".join(blocks)


def _read_step(workspace: Path, data: Any) -> str | None:
    """The answer to a text-protocol ``{"read": [...]}`` / ``{"list": dir}`` reply, else None."""
    if not isinstance(data, dict) or "files" in data or not ({"read", "list"} & set(data)):
        return None
    parts: list[str] = []
    reads = data.get("read")
    paths = [reads] if isinstance(reads, str) else reads if isinstance(reads, list) else []
    for path in paths[:NAMED_FILES_MAX]:
        parts.append(f"--- {path}\n" + answer(workspace, "read_file", json.dumps({"path": path})))
    if "list" in data:
        where = data["list"] if isinstance(data["list"], str) else "."
        parts.append(f"--- files under {where}\n" + answer(workspace, "list_files", json.dumps({"path": where})))
    return "\n".join(parts) + "\n\nNow reply with the files object (or read more)."


def _loads(text: str | None, model: str) -> Any:
    try:
        return extract_json(text or "")
    except ValueError:
        raise CoderError(
            f"model {model!r} replied without usable file operations: {excerpt(text or '(empty reply)')!r}",
            hint="try again, or a model that follows instructions more closely",
        ) from None


def _assistant(content: str | None, calls: list[_model.ToolCall]) -> dict[str, Any]:
    """The model's tool-calling turn, replayed in the history so the provider sees its own calls."""
    return {
        "role": "assistant",
        "content": content,
        "tool_calls": [
            {"id": c.id, "type": "function", "function": {"name": c.name, "arguments": c.arguments}} for c in calls
        ],
    }


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
    )


@hookimpl
def snodo_generate(name: str, request: CoderRequest) -> CoderResult | None:
    return LiteLLMCoder(request.config).generate(request) if name == "litellm" else None


@hookimpl
def snodo_preflight(coder: str, coder_config: Mapping[str, Any]) -> None:
    """The run's coder is this one: its settings read, its key set and its ``api_base``
    answering a TCP connect, before any token is spent."""
    if coder == "litellm":
        _model_access.preflight(LiteLLMCoder(coder_config).settings, who="coder 'litellm': ")
