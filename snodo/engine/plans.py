"""Plans: a goal broken into task specs, kept as ``plans/<plan_id>.json`` in the project's
runtime state. Proposing runs no coder and needs no token; ``run_plan`` dispatches each task
as an ordinary job. The ``snodo_planner`` hook decomposes (docs/plugins.md).
"""

from __future__ import annotations

import re
import secrets
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from snodo.base.errors import StateError, ToolError
from snodo.engine.jobs import now
from snodo.plugin.planning import MAX_TASKS, PlannerImpl
from snodo.protocol.models import Mode
from snodo.rules.taskids import derive_task_id
from snodo.state.atomic import atomic_create_bytes, atomic_write_json, dumps_json, file_lock, read_json
from snodo.state.runtime import runtime_dir

if TYPE_CHECKING:
    from snodo.plugin.host import PluginHost

PLAN_ID = re.compile(r"^plan-[0-9a-f]{12}$")


class Planner:
    """The planner a mode uses; what it returns is checked: 1..50 ``{title, spec}`` texts."""

    def __init__(self, impl: PlannerImpl) -> None:
        self.impl = impl

    @classmethod
    def for_mode(cls, mode: Mode, host: PluginHost) -> Planner:
        return cls(host.planner(mode))

    @property
    def name(self) -> str:
        return str(self.impl.name)

    @property
    def model(self) -> str | None:
        model = getattr(self.impl, "model", None)
        return model if isinstance(model, str) else None

    def tasks(self, goal: str) -> list[dict[str, str]]:
        if not goal.strip():
            raise ToolError("the goal is empty: there is nothing to decompose")
        items = self.impl.tasks(goal)
        if not isinstance(items, list) or not items:
            raise ToolError(f"planner {self.name!r} returned no task for the goal")
        if len(items) > MAX_TASKS:
            raise ToolError(f"planner {self.name!r} returned {len(items)} tasks; at most {MAX_TASKS} fit in one plan")
        for item in items:
            if not isinstance(item, dict) or not all(_text(item.get(key)) for key in ("title", "spec")):
                raise ToolError(f"planner {self.name!r} returned a task that is not {{title, spec}}: {item!r:.200}")
        return [{"title": i["title"], "spec": i["spec"]} for i in items]

    def spec(self, task: str, context: str | None = None) -> str:
        if not task.strip():
            raise ToolError("the task is empty: there is nothing to write a spec for")
        text = self.impl.spec(task, context)
        if not isinstance(text, str) or not text.strip():
            raise ToolError(f"planner {self.name!r} returned an empty spec")
        return text if text.endswith("\n") else text + "\n"


def _text(value: Any) -> bool:
    return isinstance(value, str) and bool(value.strip())


def plan_tasks(items: list[dict[str, str]]) -> list[dict[str, Any]]:
    """Task entries as stored: each spec's task id is what ``dispatch_task`` would derive."""
    return [
        {"index": i, "task_id": derive_task_id(t["spec"]), "title": t["title"], "spec": t["spec"], "job_id": None}
        for i, t in enumerate(items, start=1)
    ]


class PlanStore:
    def __init__(self, project: Path) -> None:
        self.directory = runtime_dir(project) / "plans"

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
                "created_at": now(),
                "updated_at": now(),
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
        """Locked read-modify-write: two dispatchers never lose each other's job ids."""
        path = self.path(plan_id)
        with file_lock(path):
            plan = change(self.load(plan_id))
            plan["updated_at"] = now()
            atomic_write_json(path, plan)
        return plan

    def list(self) -> list[dict[str, Any]]:
        if not self.directory.is_dir():
            return []
        return [self.load(p.stem) for p in sorted(self.directory.glob("plan-*.json")) if PLAN_ID.match(p.stem)]
