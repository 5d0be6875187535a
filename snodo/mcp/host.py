"""The tool handlers behind ``snodo serve``: thin callers of the shared code, and the audit.

No MCP SDK here, so every rule holds whatever a client speaks. A name the mode does not grant
is refused as unknown (INV2); a call is audited with a hash of its arguments, never the
arguments. The token a pass records stays in this process, keyed by task and spec hash:
evidence ``dispatch_task`` consumes, never a credential the caller holds (ADR 047).
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Callable, Mapping
from functools import partial
from typing import Any

from snodo.base.errors import DecisionError, PathValidationError, SnodoError, StateError, TokenError, ToolError
from snodo.engine.jobs import JobStore, QueueFull
from snodo.engine.plans import Planner, PlanStore, plan_tasks
from snodo.evidence.attest import attest_tool_commit
from snodo.git.runner import pin
from snodo.governance.service import Project, validate_task
from snodo.judging.testrun import python_settings, run_tests
from snodo.mcp.catalog import TEST_TIMEOUT, plan_mode
from snodo.mcp.checks import ToolReply, arguments_sha256, check_arguments, check_paths, job_view, require_spec
from snodo.protocol.capabilities import tools_for
from snodo.protocol.committed import refuse_drift, resolve
from snodo.rules.outcomes import AGENT_INSTRUCTION_NO_DISPATCH
from snodo.rules.taskids import check_task_id, derive_task_id, spec_sha256
from snodo.sandbox import confined
from snodo.sandbox.refusals import record_refusals, reported_by_tests
from snodo.state.decisions import check_inv3
from snodo.state.proposals import ProposalStore
from snodo.workspace import Git, PathGuard, Workspace
from snodo.workspace.gitmeta import GitMetaWatch

NOTHING_RAN = "Nothing was run and no token was issued or used"
#: Tools that run confined code in the project root or issue or use a token: each refuses a
#: protocol not in force before it starts, and what git metadata it leaves is checked.
RUNS_CONFINED = frozenset({"run_tests", "validate_task", "dispatch_task", "run_plan"})


def _with_job(index: Any, job_id: str, plan: dict[str, Any]) -> dict[str, Any]:
    """``plan`` noting the job started for task ``index``."""
    for t in plan["tasks"]:
        if t["index"] == index:
            t["job_id"] = job_id
    return {**plan, "status": "running"}


class ToolHost:
    """The tools of one mode of one project, for one server process. Calls run concurrently
    on worker threads: one lock guards the token and spec maps and the session start."""

    def __init__(self, project: Project) -> None:
        self.project = project
        self.tools: frozenset[str] = tools_for(project.mode.tools)
        self.guard = PathGuard(project.root, project.protocol.protected_paths)
        self.workspace = Workspace(project.root, self.guard)
        self.git = Git(project.root, self.guard)
        pin(project.root)  # before any tool call: the repository every later git command uses
        self.jobs = JobStore(project.root)
        self.plans = PlanStore(project.root)
        self.planner = Planner.for_mode(project.mode, project.host)
        self._lock = threading.Lock()
        self._plan_lock = threading.Lock()
        self._tokens: dict[tuple[str, str], str] = {}
        self._specs: dict[str, str] = {}
        # Open the stores now, on one thread, rather than lazily from concurrent tool calls.
        _ = (project.audit, project.sessions, project.tokens)
        guarded: dict[str, Callable[..., dict[str, Any]]] = {  # a tool that is one guarded operation
            "write_file": self.workspace.write_file,
            "delete_file": self.workspace.delete_file,
            "create_directory": self.workspace.create_directory,
            "get_status": self.git.get_status,
            "stage_files": self.git.stage_files,
            "create_branch": self.git.create_branch,
            "delete_branch": self.git.delete_branch,
        }
        self._handlers = {name: guarded.get(name) or getattr(self, f"_tool_{name}") for name in self.tools}

    def start_waiting_jobs(self) -> None:
        """Start queued jobs the free slots allow; a failure is left for the next dispatch."""
        with contextlib.suppress(SnodoError, OSError):
            self.jobs.launch_ready(max(1, self.project.protocol.execution.max_parallel_jobs))

    def call(self, name: str, arguments: Mapping[str, Any] | None) -> ToolReply:
        """Audit, check, run; every failure becomes a reply saying why, never an exception. The
        call's events are one signed append to the audit log; a broken log refuses the call."""
        args = dict(arguments or {})
        started = False
        try:
            with self.project.audit.batch():
                started = True
                return self._call(name, args)
        except SnodoError as exc:
            if started:
                return ToolReply.error(f"{name} ran, but its audit record could not be written: {exc}")
            return ToolReply.error(f"refused {name}: the call could not be recorded in the audit log: {exc}")

    def _call(self, name: str, args: dict[str, Any]) -> ToolReply:
        self.project.record("tool_call", tool=name, args_sha256=arguments_sha256(args))
        if name not in self.tools:
            reason = "unknown tool"
            refusal = (
                f"Unknown tool: {name!r}. This server is pinned to the mode {self.project.mode_id!r}, which "
                f"serves only: {', '.join(sorted(self.tools))}."
            )
        elif problem := check_arguments(name, args):
            reason, refusal = problem, f"{name} refused: {problem}."
        elif name in RUNS_CONFINED and (drift := self._not_in_force()):
            reason, refusal = drift, f"{name} refused: {drift}"
        else:
            return self._run(name, args)
        return ToolReply.error(refusal + self._audit("tool_refused", tool=name, reason=reason))

    def _run(self, name: str, args: dict[str, Any]) -> ToolReply:
        """Run the handler; after one that runs confined code, new git metadata (removed
        there and then) refuses the call, whatever the handler answered."""
        try:
            check_paths(args)
            watch = GitMetaWatch(self.project.root) if name in RUNS_CONFINED else None
            try:
                data = self._handlers[name](**{k: v for k, v in args.items() if v is not None})
            finally:
                if watch is not None and watch.found():
                    with self._lock:  # a pass earned by such code is no evidence: it must be earned again
                        self._tokens.clear()
                    watch.check()
        except PathValidationError as exc:
            found = getattr(exc, "found", ((exc.path, exc.reason),))
            notes = [self._audit("path_refused", tool=name, path=p, reason=r, source="mcp") for p, r in found]
            return ToolReply.error(f"{name} {exc}{''.join(dict.fromkeys(notes))}")
        except SnodoError as exc:
            note = self._audit("tool_error", tool=name, error=exc.message)
            return ToolReply.error(f"{name} failed: {exc}{note}")
        except Exception as exc:  # fail closed and keep serving: a bug is reported, not raised
            detail = f"{type(exc).__name__}: {exc}"
            note = self._audit("tool_error", tool=name, error=detail, internal=True)
            return ToolReply.error(
                f"{name} failed with an internal error ({detail}); this is a bug in snodo, please report it.{note}"
            )
        return ToolReply(ok=True, data=data)

    def record_cancelled(self, name: str, reason: str) -> None:
        """``tool_cancelled``: the client or a stopping server cancelled the call (its processes were killed)."""
        self._audit("tool_cancelled", tool=name, reason=reason)

    def _audit(self, event: str, **data: Any) -> str:
        """Record a refusal; the refusal stands even when the audit log cannot take it."""
        try:
            self.project.record(event, **data)
        except SnodoError as exc:
            return f" (This refusal could not be audited: {exc})"
        return ""

    def _session_id(self) -> str:
        with self._lock:
            return self.project.session().session_id

    def _tool_read_file(self, path: str) -> dict[str, Any]:
        return {"path": path, "content": self.workspace.read_file(path)}

    def _tool_list_files(self, path: str = ".") -> dict[str, Any]:
        files = self.workspace.list_files(path)
        return {"path": path, "files": files, "count": len(files)}

    def _tool_run_tests(self, path: str | None = None) -> dict[str, Any]:
        judges = self.project.protocol.validators_for(self.project.mode, "post_execute")
        with confined(self.project.sandbox_policy(self.project.root)):
            r = run_tests(
                self.project.root,
                path,
                timeout=TEST_TIMEOUT,
                **python_settings(judges, execution_python=self.project.protocol.execution.python),
            )
        reply = {
            "passed": r.passed,
            "failed_tests": list(r.failed_tests),
            "exit_code": r.exit_code,
            "summary": r.summary,
            "timed_out": r.timed_out,
            "duration": round(r.duration, 3),
            "output_tail": r.output_tail,
        }
        # Refusals are evidence: a write to governed state the sandbox refused is audited and said.
        refused = reported_by_tests([r.output_tail, r.summary], self.project.protocol.protected_paths)
        if refused:
            record_refusals(self.project.record, refused, who="run_tests", session_id=self._session_id())
            reply["sandbox_refusals"] = [{"path": x.path, "error": x.error} for x in refused]
            reply["note"] = "the sandbox refused writes to governed paths; each is recorded as a sandbox_refusal"
        return reply

    def _tool_read_diff(self, ref: str | None = None, staged: bool = False) -> dict[str, Any]:
        return {"ref": ref, "staged": staged, "diff": self.git.read_diff(ref, staged=staged)}

    def _tool_commit(self, message: str) -> dict[str, Any]:
        sha = self.git.commit(message)
        attest_tool_commit(self.project, sha, tool="commit", session_id=self._session_id())
        return {"commit": sha}

    def _tool_merge_branch(self, name: str, message: str | None = None) -> dict[str, Any]:
        merged = self.git.merge_branch(name, message)
        attest_tool_commit(self.project, str(merged["head"]), tool="merge_branch", session_id=self._session_id())
        return merged

    def _tool_validate_task(self, task_spec: str | None = None, task_id: str | None = None) -> dict[str, Any]:
        """Without ``task_id`` the id is derived from the spec, as ``dispatch_task`` and the
        CLI do; with only ``task_id``, the spec this server last validated for it is used."""
        if task_id is not None:
            check_task_id(task_id)
            if task_spec is None and (task_spec := self._specs.get(task_id)) is None:
                raise ToolError(
                    f"task_spec is required: this server has not validated task {task_id!r} before, so there "
                    "is no spec to validate again"
                )
        elif task_spec is None:
            raise ToolError("give task_spec (and optionally task_id), or the task_id of a task validated before")
        spec = require_spec(task_spec)
        task_id = task_id if task_id is not None else derive_task_id(spec)
        self._session_id()  # the first call that needs a session starts it
        outcome = validate_task(self.project, spec=spec, task_id=task_id, phase="pre_execute")
        with self._lock:  # only a spec that was validated is one to validate again
            self._specs[task_id] = spec
            if outcome.token is not None:
                self._tokens[(outcome.task_id, outcome.spec_sha256)] = outcome.token
        payload = outcome.payload()
        if outcome.status == "pass" and "dispatch_task" not in self.tools:
            payload["instruction"] = AGENT_INSTRUCTION_NO_DISPATCH
        return payload

    def _tool_dispatch_task(self, task_spec: str, task_id: str | None = None) -> dict[str, Any]:
        spec = require_spec(task_spec)
        task_id = check_task_id(task_id) if task_id is not None else derive_task_id(spec)
        return self._dispatch(spec, task_id, self.project.mode_id)

    def _dispatch(self, spec: str, task_id: str, mode: str) -> dict[str, Any]:
        """Create and start the job; only then use up the token recorded for this task and spec
        (keyed by both, so another's token is never consumed; a failed start consumes nothing)."""
        p = self.project
        if (refusal := p.protocol.cannot_run_tasks(mode)) is not None:
            raise ToolError(refusal)
        sha = spec_sha256(spec)
        session_id = self._session_id()
        execution = p.protocol.execution
        try:
            self.jobs.check_room(execution.max_queued_jobs)
        except QueueFull as exc:
            raise ToolError(f"{exc}; {exc.hint}") from None
        job = self.jobs.create(
            spec=spec,
            task_id=task_id,
            mode=mode,
            coder=None,
            background=True,
            protocol_path=p.loaded.path.resolve(),
        )
        job_id = str(job["job_id"])
        try:
            self.jobs.launch_ready(max(1, execution.max_parallel_jobs))
            started = self.jobs.load(job_id)
            if started["status"] == "halted" and started.get("error"):
                raise StateError(str(started["error"]))
        except (OSError, SnodoError) as exc:
            self.jobs.update(
                job_id, status="halted", outcome="internal_error", error=f"the job could not be started: {exc}"
            )
            p.record("dispatch_failed", task_id=task_id, job_id=job_id, error=str(exc), source="mcp")
            raise ToolError(f"the job for task {task_id!r} could not be started: {exc}; no token was used") from None
        p.record(
            "dispatch_request", task_id=task_id, job_id=job_id, spec_sha256=sha, session_id=session_id, source="mcp"
        )
        with self._lock:
            token = self._tokens.pop((task_id, sha), None)
        consumed = False
        if token is not None:
            consumer = f"mcp-dispatch:{job_id}"
            try:
                claims = p.tokens.consume(token, task_id=task_id, spec_sha256=sha, consumer=consumer)
            except TokenError as exc:  # e.g. expired: the job validates again on its own anyway
                p.record("token_refused", task_id=task_id, job_id=job_id, consumer=consumer, reason=exc.reason)
            else:
                p.record("token_consumed", task_id=task_id, jti=claims.jti, consumer=consumer, job_id=job_id)
                consumed = True
        return {"status": "accepted", "job_id": job_id, "task_id": task_id, "token_consumed": consumed}

    def _not_in_force(self) -> str | None:
        """Why a tool that issues or uses a token or runs code must not run now: the working tree
        differs from the rules in force, or those from the rules this server serves."""
        p = self.project
        path = p.loaded.path
        try:
            in_force = resolve(path, cache_dir=p.home / "cache" / "git")
            refuse_drift(path, in_force)
        except SnodoError as exc:
            return f"{exc}\n{NOTHING_RAN}."
        served = p.loaded.in_force
        if served is not None and served.digest != in_force.digest:
            return (
                f"{path}: the protocol in force changed since this server started (now commit "
                f"{str(in_force.commit)[:12]}); this server validates, tests and dispatches under the rules it "
                f"started with. {NOTHING_RAN}; restart the server (the host) to serve them"
            )
        return None

    def _tool_get_job_status(self, job_id: str) -> dict[str, Any]:
        return job_view(self.jobs.load(job_id))

    def _tool_list_jobs(self) -> dict[str, Any]:
        jobs = [job_view(j) for j in self.jobs.list()]
        return {"jobs": jobs, "count": len(jobs)}

    def _tool_propose_adjudicate(self, decision_id: str, decision: str, justification: str) -> dict[str, Any]:
        p = self.project
        if decision not in ("approve", "reject"):
            raise ToolError(f"decision must be 'approve' or 'reject', got {decision!r}")
        if not justification.strip():
            raise ToolError("a justification is required: the human deciding reads it")
        session, pending = p.sessions.find_pending(decision_id, p.root)
        try:
            check_inv3(pending)  # the same rule `snodo authorize` applies: a refused proposal is never filed
        except DecisionError as exc:
            raise ToolError(f"{exc}; {exc.hint}" if exc.hint else str(exc)) from None
        path, _ = ProposalStore(p.root).add(
            pending,
            session_id=session.session_id,
            decision="approve" if decision == "approve" else "reject",
            justification=justification,
            proposed_by=f"mcp:{p.mode_id}",
        )
        rel = path.relative_to(p.root).as_posix()
        p.record(
            "adjudication_proposed",
            decision_id=decision_id,
            task_id=pending.task_id,
            decision=decision,
            proposal=rel,
            session_id=self._session_id(),
        )
        return {
            "status": "proposed",
            "decision_id": decision_id,
            "decision": decision,
            "proposal": rel,
            "instruction": f"Nothing is decided yet: a person reviews the escalation and runs `snodo "
            f"authorize {decision_id}` (add --reject to reject), then the task is validated again.",
        }

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
            tasks = [{k: v for k, v in t.items() if k != "job_id"} for t in plan_tasks(self.planner.tasks(spec))]
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
                self.plans.update(plan_id, partial(_with_job, task["index"], reply["job_id"]))
                started.append(
                    {"index": task["index"], **{k: reply[k] for k in ("task_id", "job_id", "token_consumed")}}
                )
        self.project.record("plan_run", plan_id=plan_id, mode=mode, jobs=[s["job_id"] for s in started])
        return {"status": "accepted", "plan_id": plan_id, "mode": mode, "jobs": started, "already_dispatched": earlier}
