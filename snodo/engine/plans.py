"""Plans: a goal broken into task specs, kept as ``<project>/.snodo/plans/<plan_id>.json``.

A plan is authoring, not execution: proposing, decomposing and writing specs run no coder,
touch no working file and need no token (ADR 047). Only ``run_plan`` executes, and it does
so by dispatching each task as an ordinary job, which validates the task again before
anything runs. Plan files are governance state, so they are written here through the
atomic state API, never through the agent's path-guarded tool surface.

Decomposition is deterministic (bullet lines, else sentences, else clauses joined by
"and") when the mode has no model to ask: its coder is ``mock`` or its ``coder_config``
names no ``model``. Otherwise the mode's model is asked once, through litellm (imported
only then), for a list of ``{title, spec}`` objects; a reply that is not such a list is
an error, never silently replaced by the deterministic split, because the operator chose
a model and should learn that it did not answer.
"""

from __future__ import annotations

import json
import os
import re
import secrets
from collections.abc import Callable, Mapping
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from attrs import Factory, frozen

from snodo.errors import EnvironmentProblem, StateError, ToolError
from snodo.governance.service import derive_task_id
from snodo.protocol.models import Mode
from snodo.state.atomic import atomic_create_bytes, atomic_write_json, dumps_json, file_lock, read_json

PLAN_ID = re.compile(r"^plan-[0-9a-f]{12}$")
MAX_TASKS = 50
DEFAULT_MODEL_TIMEOUT = 120.0

_BULLET = re.compile(r"^\s*(?:[-*+\u2022]|\d+[.)])\s+(?:\[[ xX]\]\s+)?(?P<text>\S.*?)\s*$")
_SENTENCE_END = re.compile(r"(?<=[.!?;])\s+")
_AND = re.compile(r",?\s+(?:and\s+then|and|then)\s+", re.IGNORECASE)
_CONNECTIVE = re.compile(r"^(?:and\s+|then\s+|also\s+|finally\s+|next\s+|first\s+)+", re.IGNORECASE)
_ARTICLE = re.compile(r"^(?:a|an|the|some|another)\b", re.IGNORECASE)
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


def _now() -> str:
    return datetime.now(UTC).isoformat(timespec="seconds")


# ------------------------------------------------------------------ deterministic split


def _clean(item: str) -> str:
    text = _CONNECTIVE.sub("", " ".join(item.split())).strip().rstrip(".;:!?,").strip()
    return text[:1].upper() + text[1:]


def _split_and(sentence: str) -> list[str]:
    """Clauses joined by "and"/"then", when each clause stands on its own.

    "add a greet function and a farewell function" gives two tasks, the second borrowing
    the first's verb; "read and write files" stays one task (a one-word clause is not a
    task, it is part of a compound verb).
    """
    parts = [p.strip() for p in _AND.split(sentence) if p.strip()]
    if len(parts) < 2 or any(len(p.split()) < 2 for p in parts):
        return [sentence]
    verb = parts[0].split()[0]
    return [parts[0], *(f"{verb} {p}" if _ARTICLE.match(p) else p for p in parts[1:])]


def split_goal(goal: str) -> list[str]:
    """The deterministic decomposition: bullet lines, else sentences, else "and" clauses."""
    bullets = [m.group("text") for line in goal.splitlines() if (m := _BULLET.match(line))]
    if bullets:
        items = bullets
    else:
        flat = " ".join(goal.split())
        items = [s for s in _SENTENCE_END.split(flat) if s.strip()]
        if len(items) == 1:
            items = _split_and(items[0])
    tasks: list[str] = []
    for item in items:
        text = _clean(item)
        if text and text.casefold() not in {t.casefold() for t in tasks}:
            tasks.append(text)
    if not tasks:
        raise ToolError("the goal is empty: there is nothing to decompose")
    if len(tasks) > MAX_TASKS:
        raise ToolError(f"the goal splits into {len(tasks)} tasks; at most {MAX_TASKS} fit in one plan")
    return tasks


def deterministic_spec(task: str) -> str:
    """A task spec that says exactly what the task line says and promises nothing more.

    Acceptance criteria are not invented here: a criterion nobody asked for would be judged
    by the validators as if the author had meant it.
    """
    text = _clean(task)
    if not text:
        raise ToolError("the task is empty: there is nothing to write a spec for")
    return f"{text}.\n"


# ------------------------------------------------------------------------ the model


@frozen(kw_only=True)
class Planner:
    """How this mode decomposes: with ``model`` (and its settings) or deterministically."""

    model: str | None = None
    settings: Mapping[str, Any] = Factory(dict)

    @property
    def name(self) -> str:
        return f"model:{self.model}" if self.model else "deterministic"

    @classmethod
    def for_mode(cls, mode: Mode) -> Planner:
        """Deterministic for the ``mock`` coder or when no model is configured."""
        model = mode.coder_config.get("model")
        if mode.coder == "mock" or not isinstance(model, str) or not model.strip():
            return cls()
        return cls(model=model, settings=dict(mode.coder_config))

    def tasks(self, goal: str) -> list[dict[str, str]]:
        """``[{title, spec}]`` for ``goal``."""
        if not goal.strip():
            raise ToolError("the goal is empty: there is nothing to decompose")
        if self.model is None:
            return [{"title": t, "spec": deterministic_spec(t)} for t in split_goal(goal)]
        return _parse_tasks(self._ask(_SYSTEM, f"Goal:\n{goal.strip()}"), self.model)

    def spec(self, task: str, context: str | None = None) -> str:
        if not task.strip():
            raise ToolError("the task is empty: there is nothing to write a spec for")
        if self.model is None:
            return deterministic_spec(task)
        prompt = f"Task:\n{task.strip()}" + (f"\n\nPart of the goal:\n{context.strip()}" if context else "")
        text = _strip_fence(self._ask(_SPEC_SYSTEM, prompt)).strip()
        if not text:
            raise ToolError(f"model {self.model!r} returned an empty spec")
        return text + "\n"

    def _ask(self, system: str, prompt: str) -> str:
        """One completion; a provider failure is the operator's to fix (EnvironmentProblem)."""
        # Like the built-in model plugins: never fetch litellm's cost map over the network.
        os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
        import litellm

        assert self.model is not None
        litellm.suppress_debug_info = True
        kwargs: dict[str, Any] = {
            "model": self.model,
            "messages": [{"role": "system", "content": system}, {"role": "user", "content": prompt}],
            "timeout": _number(self.settings.get("timeout"), DEFAULT_MODEL_TIMEOUT),
        }
        if isinstance(self.settings.get("api_base"), str):
            kwargs["api_base"] = self.settings["api_base"]
        if self.settings.get("mock_response") is not None:
            mock = self.settings["mock_response"]
            kwargs["mock_response"] = mock[0] if isinstance(mock, list) and mock else mock
        elif isinstance(self.settings.get("api_key_env"), str):
            key = os.environ.get(self.settings["api_key_env"])
            if not key:
                raise EnvironmentProblem(
                    f"no credentials for model {self.model!r}: {self.settings['api_key_env']} is not set"
                )
            kwargs["api_key"] = key
        try:
            response = litellm.completion(**kwargs)
            content = response.choices[0].message.content
        except Exception as exc:
            raise EnvironmentProblem(
                f"model {self.model!r} could not be asked to plan: "
                f"{type(exc).__name__}: {' '.join(str(exc).split())[:300]}"
            ) from None
        if not isinstance(content, str):
            raise ToolError(f"model {self.model!r} returned no text")
        return content


def _number(value: Any, default: float) -> float:
    if isinstance(value, int | float) and not isinstance(value, bool) and value > 0:
        return float(value)
    return default


def _strip_fence(text: str) -> str:
    match = _FENCE.search(text)
    return match.group(1) if match else text


def _parse_tasks(reply: str, model: str) -> list[dict[str, str]]:
    """The model's task list, strictly: anything else is reported with an excerpt."""
    excerpt = " ".join(reply.split())[:200]
    try:
        data = json.loads(_strip_fence(reply))
    except json.JSONDecodeError:
        raise ToolError(f"model {model!r} did not answer with a JSON task list: {excerpt!r}") from None
    if isinstance(data, dict) and isinstance(data.get("tasks"), list):
        data = data["tasks"]
    if not isinstance(data, list) or not data:
        raise ToolError(f"model {model!r} answered without any task: {excerpt!r}")
    tasks: list[dict[str, str]] = []
    for item in data[:MAX_TASKS]:
        if isinstance(item, str) and item.strip():
            tasks.append({"title": _clean(item), "spec": deterministic_spec(item)})
        elif isinstance(item, dict) and isinstance(item.get("title"), str) and item["title"].strip():
            spec = item.get("spec")
            if not isinstance(spec, str) or not spec.strip():
                spec = deterministic_spec(item["title"])
            tasks.append({"title": " ".join(item["title"].split()), "spec": spec.strip() + "\n"})
        else:
            raise ToolError(f"model {model!r} returned a task that is not {{title, spec}}: {item!r:.200}")
    return tasks


# ---------------------------------------------------------------------------- store


def plan_tasks(items: list[dict[str, str]]) -> list[dict[str, Any]]:
    """Task entries as stored: each spec's task id is what ``dispatch_task`` would derive."""
    return [
        {"index": i, "task_id": derive_task_id(t["spec"]), "title": t["title"], "spec": t["spec"], "job_id": None}
        for i, t in enumerate(items, start=1)
    ]


class PlanStore:
    """Plan files of one project; every write is atomic, every update locked."""

    def __init__(self, project: Path) -> None:
        self.root = Path(project)
        self.directory = self.root / ".snodo" / "plans"

    def path(self, plan_id: str) -> Path:
        if not isinstance(plan_id, str) or not PLAN_ID.match(plan_id):
            raise ToolError(f"{plan_id!r} is not a plan id (expected plan-<12 hex digits>)")
        return self.directory / f"{plan_id}.json"

    def create(self, *, goal: str, tasks: list[dict[str, str]], mode: str, planner: str) -> dict[str, Any]:
        self.directory.mkdir(parents=True, exist_ok=True)
        while True:
            plan_id = "plan-" + secrets.token_hex(6)
            plan = {
                "plan_id": plan_id,
                "goal": goal,
                "mode": mode,
                "planner": planner,
                "status": "proposed",
                "revision": 1,
                "created_at": _now(),
                "updated_at": _now(),
                "tasks": plan_tasks(tasks),
            }
            if atomic_create_bytes(self.path(plan_id), dumps_json(plan).encode("utf-8"), mode=0o644):
                return plan

    def load(self, plan_id: str) -> dict[str, Any]:
        path = self.path(plan_id)
        try:
            plan = read_json(path)
        except FileNotFoundError:
            raise StateError(
                f"no plan {plan_id!r} (looked for {path})",
                hint="propose_plan creates plans; their ids start with plan-",
            ) from None
        if not isinstance(plan, dict) or not isinstance(plan.get("tasks"), list):
            raise StateError(f"{path} is corrupt: not a plan")
        return plan

    def update(self, plan_id: str, change: Callable[[dict[str, Any]], dict[str, Any]]) -> dict[str, Any]:
        """Locked read-modify-write, so two dispatchers never lose each other's job ids."""
        path = self.path(plan_id)
        with file_lock(path):
            plan = change(self.load(plan_id))
            plan["updated_at"] = _now()
            atomic_write_json(path, plan)
        return plan

    def list(self) -> list[dict[str, Any]]:
        if not self.directory.is_dir():
            return []
        return [self.load(p.stem) for p in sorted(self.directory.glob("plan-*.json")) if PLAN_ID.match(p.stem)]
