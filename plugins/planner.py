"""The model-backed planner: the mode's model breaks a goal into task specs.

Supplied through the ``snodo_planner`` hook (registered with the litellm plugin) for any
mode whose ``coder_config`` names a ``model`` and whose coder is not the offline ``mock``;
other modes fall through to the core's deterministic planner. It calls the model through
the shared client (:mod:`snodo_plugins._model`), so it reads the same provider settings
from ``coder_config`` (the model settings of docs/providers.md, and ``mock_response``) and
fails the same classified way. A reply that is not a task list is an error, never silently
replaced by the deterministic split: the operator chose a model and should learn that it
did not answer.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from snodo.api import CoderError, Mode, hookimpl

from . import _model
from ._model_settings import ModelSettings, SettingsError, excerpt
from ._verdicts import extract_json

MAX_TASKS = 50
_FENCE = re.compile(r"```[A-Za-z]*[ \t]*\n(.*?)```", re.DOTALL)

_SYSTEM = (
    "You break a software goal into small, independent implementation tasks, in the order "
    "they should be done. Answer with only a JSON array, no other text: "
    '[{"title": "<one imperative line>", "spec": "<the task spec: what to build, and an '
    "'Acceptance criteria:' section with checkable bullets>\"}]. At most "
    f"{MAX_TASKS} tasks."
)
_SPEC_SYSTEM = (
    "You write one task spec for a coding agent. Answer with only the spec text: a first line "
    "naming the task, a short description, and an 'Acceptance criteria:' section with bullets "
    "a reviewer can check."
)


class ModelPlanner:
    """Asks ``model`` once per call; ``config`` is the mode's ``coder_config``."""

    def __init__(self, model: str, config: Mapping[str, Any]) -> None:
        self.model = model
        self.config = dict(config)
        self.name = f"model:{model}"

    def _ask(self, system: str, prompt: str) -> str:
        try:
            settings = ModelSettings.read(self.model, self.config)
        except SettingsError as exc:
            raise CoderError(f"planner {self.name!r}: coder_config.{exc}") from None
        mock = self.config.get("mock_response")
        reply = _model.complete(
            settings,
            [{"role": "system", "content": system}, {"role": "user", "content": prompt}],
            mock_response=mock[0] if isinstance(mock, list) and mock else None,
        )
        if not reply.content or not reply.content.strip():
            raise CoderError(f"model {self.model!r} returned no text to plan with")
        return reply.content

    def tasks(self, goal: str) -> list[dict[str, str]]:
        return parse_tasks(self._ask(_SYSTEM, f"Goal:\n{goal.strip()}"), self.model)

    def spec(self, task: str, context: str | None = None) -> str:
        prompt = f"Task:\n{task.strip()}" + (f"\n\nPart of the goal:\n{context.strip()}" if context else "")
        text = _strip_fence(self._ask(_SPEC_SYSTEM, prompt)).strip()
        if not text:
            raise CoderError(f"model {self.model!r} returned an empty spec")
        return text + "\n"


def _strip_fence(text: str) -> str:
    match = _FENCE.search(text)
    return match.group(1) if match else text


def _line(text: str) -> str:
    flat = " ".join(text.split()).rstrip(".;:!?,").strip()
    return flat[:1].upper() + flat[1:]


def parse_tasks(reply: str, model: str) -> list[dict[str, str]]:
    """The model's task list, strictly: anything else is reported with an excerpt."""
    quoted = excerpt(reply, 200)
    try:
        data = extract_json(_strip_fence(reply))
    except ValueError:
        raise CoderError(f"model {model!r} did not answer with a JSON task list: {quoted!r}") from None
    if isinstance(data, dict) and isinstance(data.get("tasks"), list):
        data = data["tasks"]
    if not isinstance(data, list) or not data:
        raise CoderError(f"model {model!r} answered without any task: {quoted!r}")
    tasks: list[dict[str, str]] = []
    for item in data[:MAX_TASKS]:
        if isinstance(item, str) and item.strip():
            tasks.append({"title": _line(item), "spec": _line(item) + ".\n"})
        elif isinstance(item, dict) and isinstance(item.get("title"), str) and item["title"].strip():
            spec = item.get("spec")
            if not isinstance(spec, str) or not spec.strip():
                spec = _line(item["title"]) + "."
            tasks.append({"title": " ".join(item["title"].split()), "spec": spec.strip() + "\n"})
        else:
            raise CoderError(f"model {model!r} returned a task that is not {{title, spec}}: {item!r:.200}")
    return tasks


@hookimpl
def snodo_planner(mode: Mode) -> ModelPlanner | None:
    model = mode.coder_config.get("model")
    if mode.coder == "mock" or not isinstance(model, str) or not model.strip():
        return None
    return ModelPlanner(model, mode.coder_config)
