"""The plan tools of ``snodo serve``: a mixin of :class:`snodo.mcp.host.ToolHost` (same audit,
same locks; ``run_plan`` dispatches through the host's one ``_dispatch``).
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

from snodo.base.errors import SnodoError, ToolError
from snodo.engine.jobs import JobStore
from snodo.engine.plans import Planner, PlanStore, plan_tasks
from snodo.governance.service import Project
from snodo.mcp.catalog import plan_mode
from snodo.mcp.checks import job_view, require_spec
from snodo.rules.taskids import check_task_id, derive_task_id


def _record_job(index: Any, job_id: str) -> Callable[[dict[str, Any]], dict[str, Any]]:
    """A plan update that notes the job started for task ``index``."""

    def change(plan: dict[str, Any]) -> dict[str, Any]:
        for t in plan["tasks"]:
            if t["index"] == index:
                t["job_id"] = job_id
        return {**plan, "status": "running"}

    return change


class PlanTools:
    """Plan handlers; the host provides the stores, the lock and ``_dispatch``."""

    project: Project
    planner: Planner
    plans: PlanStore
    jobs: JobStore
    _plan_lock: threading.Lock

    def _dispatch(self, spec: str, task_id: str, mode: str | None = None) -> dict[str, Any]:
        raise NotImplementedError

    def _tool_propose_plan(self, goal: str) -> dict[str, Any]:
        tasks = self.planner.tasks(goal)
        plan = self.plans.create(goal=goal, tasks=tasks, mode=self.project.mode_id, planner=self.planner.name)
        self.project.record(
            "plan_proposed", plan_id=plan["plan_id"], tasks=len(plan["tasks"]), planner=self.planner.name
        )
        return plan

    def _tool_decompose(self, plan_id: str | None = None, spec: str | None = None) -> dict[str, Any]:
        if (plan_id is None) == (spec is None):
            raise ToolError("give exactly one of plan_id (decompose a stored plan again) and spec (split a text)")
        if spec is not None:
            tasks = plan_tasks(self.planner.tasks(spec))
            for t in tasks:
                del t["job_id"]
            return {"tasks": tasks, "planner": self.planner.name, "stored": False}
        assert plan_id is not None
        with self._plan_lock:
            plan = self.plans.load(plan_id)
            if any(t.get("job_id") for t in plan["tasks"]):
                raise ToolError(
                    f"plan {plan_id} already has dispatched tasks; decomposing it again would "
                    "orphan their jobs. Propose a new plan instead."
                )
            tasks = plan_tasks(self.planner.tasks(str(plan["goal"])))

            def change(current: dict[str, Any]) -> dict[str, Any]:
                return {
                    **current,
                    "tasks": tasks,
                    "revision": int(current.get("revision", 1)) + 1,
                    "planner": self.planner.name,
                    "status": "proposed",
                }

            plan = self.plans.update(plan_id, change)
        self.project.record(
            "plan_decomposed", plan_id=plan_id, tasks=len(tasks), planner=self.planner.name, revision=plan["revision"]
        )
        return {**plan, "stored": True}

    def _tool_generate_spec(self, task: str) -> dict[str, Any]:
        spec = self.planner.spec(task)
        return {"task": task, "task_id": derive_task_id(spec), "spec": spec, "planner": self.planner.name}

    def _tool_get_plan(self, plan_id: str) -> dict[str, Any]:
        plan = self.plans.load(plan_id)
        for task in plan["tasks"]:
            if task.get("job_id"):
                try:
                    task["job"] = job_view(self.jobs.load(task["job_id"]))
                except SnodoError as exc:
                    task["job"] = {"job_id": task["job_id"], "error": str(exc)}
        return plan

    def _tool_run_plan(self, plan_id: str) -> dict[str, Any]:
        mode = plan_mode(self.project.mode)  # the rule the server instructions describe
        with self._plan_lock:
            plan = self.plans.load(plan_id)
            started: list[dict[str, Any]] = []
            earlier = [{"task_id": t["task_id"], "job_id": t["job_id"]} for t in plan["tasks"] if t.get("job_id")]
            for task in plan["tasks"]:
                if task.get("job_id"):
                    continue
                reply = self._dispatch(
                    require_spec(str(task["spec"]), "the plan task's spec"), check_task_id(task["task_id"]), mode
                )
                index = task["index"]
                self.plans.update(plan_id, _record_job(index, reply["job_id"]))
                started.append(
                    {
                        "index": index,
                        "task_id": reply["task_id"],
                        "job_id": reply["job_id"],
                        "token_consumed": reply["token_consumed"],
                    }
                )
        self.project.record("plan_run", plan_id=plan_id, mode=mode, jobs=[s["job_id"] for s in started])
        return {"status": "accepted", "plan_id": plan_id, "mode": mode, "jobs": started, "already_dispatched": earlier}
