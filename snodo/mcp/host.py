"""The tool handlers behind ``snodo serve``: thin callers of the shared code, and the audit.

No MCP SDK here. :class:`ToolHost` takes a tool name and its arguments and answers with a
:class:`ToolReply`; the server module only translates that to and from the wire, so every
rule below holds whatever transport or protocol version a client speaks:

* a name the served mode does not grant is refused as unknown (INV2), even when another
  mode of the protocol has it;
* every call is audited as ``tool_call`` with a hash of its arguments, never the arguments
  (they may hold file contents); refusals are audited too (``tool_refused``,
  ``path_refused``);
* file and git mutations go through the one path guard (ADR 026), validation through the
  one shared ``validate_task`` (ADR 015), jobs through the same engine as ``snodo run``;
* the token a pass records stays in this process, keyed by task and spec hash. It is
  never returned: it is evidence that ``dispatch_task`` consumes, not a credential the
  caller holds (ADR 047).
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import threading
from collections.abc import Callable, Mapping
from typing import Any

from attrs import frozen

from snodo.engine.jobs import JobStore, QueueFull
from snodo.engine.plans import Planner, PlanStore, plan_tasks
from snodo.errors import DecisionError, PathValidationError, SnodoError, StateError, TokenError, ToolError
from snodo.evidence.attest import attest_tool_commit
from snodo.gitrun import pin
from snodo.governance.service import Project, check_task_id, derive_task_id, spec_sha256, validate_task
from snodo.mcp.catalog import TOOLS, ToolDef, build_instructions, plan_mode, tools_for_mode
from snodo.outcomes import AGENT_INSTRUCTION_NO_DISPATCH
from snodo.sandbox import confined
from snodo.state.atomic import canonical_json
from snodo.state.decisions import check_inv3
from snodo.state.proposals import ProposalStore
from snodo.workspace import Git, PathGuard, Workspace, run_tests
from snodo.workspace.gitmeta import GitMetaWatch
from snodo.workspace.testrun import python_settings

TEST_TIMEOUT = 300.0
#: Tools that run confined code in the project root: what git metadata it leaves is checked.
RUNS_CONFINED = frozenset({"run_tests", "validate_task", "dispatch_task", "run_plan"})
_KIND_NAMES = {"string": "a string", "boolean": "true or false", "string_list": "a non-empty list of strings"}


@frozen(kw_only=True)
class ToolReply:
    """What a tool call answered: ``data`` on success, or an error ``message`` saying why."""

    ok: bool
    data: dict[str, Any] | None = None
    message: str = ""

    @classmethod
    def error(cls, message: str) -> ToolReply:
        return cls(ok=False, message=message)

    def text(self) -> str:
        if not self.ok:
            return self.message
        return json.dumps(self.data, indent=2, ensure_ascii=False, default=str)


def arguments_sha256(arguments: Mapping[str, Any]) -> str:
    """SHA-256 of the canonical JSON of the arguments: proves what was asked, reveals nothing."""
    try:
        data = canonical_json(dict(arguments))
    except (TypeError, ValueError):
        data = json.dumps(dict(arguments), sort_keys=True, default=repr).encode("utf-8")
    return hashlib.sha256(data).hexdigest()


def check_arguments(tool: ToolDef, arguments: Mapping[str, Any]) -> str | None:
    """Why the arguments do not fit the tool's schema, or None. Unknown names are refused:
    a misspelt optional argument must not be silently ignored."""
    allowed = {p.name: p for p in tool.params}
    unknown = sorted(set(arguments) - set(allowed))
    if unknown:
        takes = ", ".join(allowed) or "no arguments"
        return f"unexpected argument(s) {', '.join(map(repr, unknown))}; {tool.name} takes: {takes}"
    for p in tool.params:
        value = arguments.get(p.name)
        if value is None:
            if p.required:
                return f"missing required argument {p.name!r}"
            continue
        fits = (
            isinstance(value, str)
            if p.kind == "string"
            else type(value) is bool
            if p.kind == "boolean"
            else isinstance(value, list) and bool(value) and all(isinstance(v, str) for v in value)
        )
        if not fits:
            return f"argument {p.name!r} must be {_KIND_NAMES[p.kind]}, got {type(value).__name__}"
    return None


MAX_ARGUMENT_BYTES = 4 * 1024 * 1024
"""Default size limit of one call's arguments (UTF-8 bytes); ``SNODO_MAX_ARGUMENT_BYTES`` changes it."""
MAX_PATH_BYTES = 4096
MAX_PATH_COMPONENT_BYTES = 255
_PATH_PARAMS = frozenset({"path", "paths"})


def argument_limit() -> int:
    """The configured size limit of a call's arguments."""
    raw = os.environ.get("SNODO_MAX_ARGUMENT_BYTES", "").strip()
    if raw.isdigit() and int(raw) > 0:
        return int(raw)
    return MAX_ARGUMENT_BYTES


def check_sizes(arguments: Mapping[str, Any], limit: int) -> str | None:
    """Why the arguments are too large, or None. Checked before anything else reads them."""
    total = 0
    for name, value in arguments.items():
        for item in value if isinstance(value, list) else [value]:
            if isinstance(item, str):
                total += len(item.encode("utf-8", "surrogatepass"))
        if total > limit:
            return (
                f"the arguments are larger than the limit of {limit:,} bytes (at {name!r}); "
                "split the work into smaller calls, or raise SNODO_MAX_ARGUMENT_BYTES "
                "(see docs/architecture.md, bounded inputs)"
            )
    return None


def path_problem(path: str) -> str | None:
    """Why ``path`` cannot name a file at all (refused before the file system sees it)."""
    if "\0" in path:
        return "the path contains a NUL character"
    try:
        encoded = path.encode("utf-8")
    except UnicodeEncodeError:
        return "the path is not valid Unicode text (it holds an unpaired surrogate)"
    if len(encoded) > MAX_PATH_BYTES:
        return f"the path is {len(encoded):,} bytes long; paths are limited to {MAX_PATH_BYTES} bytes"
    if any(len(part.encode("utf-8")) > MAX_PATH_COMPONENT_BYTES for part in path.split("/")):
        return f"a component of the path is longer than {MAX_PATH_COMPONENT_BYTES} bytes"
    return None


def _check_paths(arguments: Mapping[str, Any]) -> None:
    for name in _PATH_PARAMS & arguments.keys():
        value = arguments[name]
        for path in value if isinstance(value, list) else [value]:
            problem = path_problem(path) if isinstance(path, str) else None
            if problem:
                shown_path = path if len(path) <= 200 else path[:200] + f"... ({len(path):,} characters)"
                raise PathValidationError(shown_path.encode("utf-8", "backslashreplace").decode("utf-8"), problem)


def _spec(text: str, what: str = "task_spec") -> str:
    if not text.strip():
        raise ToolError(f"{what} is empty: there is nothing to validate or run")
    return text


def _record_job(index: Any, job_id: str) -> Callable[[dict[str, Any]], dict[str, Any]]:
    """A plan update that notes the job started for task ``index``."""

    def change(plan: dict[str, Any]) -> dict[str, Any]:
        for t in plan["tasks"]:
            if t["index"] == index:
                t["job_id"] = job_id
        return {**plan, "status": "running"}

    return change


def job_view(job: Mapping[str, Any]) -> dict[str, Any]:
    """A job as a tool reports it: status first, then what the run said, if it finished."""
    view: dict[str, Any] = {k: job.get(k) for k in ("job_id", "task_id", "mode", "status", "created_at", "updated_at")}
    if job.get("status") == "halted":
        view["outcome"] = job.get("outcome")
    result = job.get("result")
    if isinstance(result, Mapping):
        for key in ("phase", "message", "branch", "commit", "halted_ref", "discarded", "files", "decision_id", "next"):
            if result.get(key) not in (None, "", []):
                view[key] = result[key]
    if job.get("error"):
        view["error"] = job["error"]
    return view


class ToolHost:
    """The tools of one mode of one project, for one server process.

    Calls may run concurrently on worker threads; the in-memory token and spec maps and
    session start are guarded by one lock, everything else is already safe across
    processes (audit, token store, job and plan files).
    """

    def __init__(self, project: Project) -> None:
        self.project = project
        self.tools: frozenset[str] = tools_for_mode(project.mode)
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
        self._handlers: dict[str, Callable[..., dict[str, Any]]] = {
            name: getattr(self, f"_tool_{name}") for name in self.tools
        }
        self.argument_limit = argument_limit()

    def start_waiting_jobs(self) -> None:
        """Start queued jobs the free slots allow; a failure is left for the next dispatch."""
        with contextlib.suppress(SnodoError, OSError):
            self.jobs.launch_ready(max(1, self.project.protocol.execution.max_parallel_jobs))

    # ----------------------------------------------------------------- surface

    @property
    def instructions(self) -> str:
        return build_instructions(self.project.protocol, self.project.mode, self.tools)

    def definitions(self) -> list[ToolDef]:
        return [TOOLS[name] for name in sorted(self.tools)]

    def call(self, name: str, arguments: Mapping[str, Any] | None) -> ToolReply:
        """Audit, check, run; every failure becomes a reply saying why, never an exception.

        The call's events are written to the audit log as one signed append when it ends;
        a broken log refuses the call before it runs.
        """
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
            note = self._audit("tool_refused", tool=name, reason="unknown tool")
            return ToolReply.error(
                f"Unknown tool: {name!r}. This server is pinned to the mode {self.project.mode_id!r}, which "
                f"serves only: {', '.join(sorted(self.tools))}.{note}"
            )
        problem = check_sizes(args, self.argument_limit) or check_arguments(TOOLS[name], args)
        if problem:
            note = self._audit("tool_refused", tool=name, reason=problem)
            return ToolReply.error(f"{name} refused: {problem}.{note}")
        try:
            _check_paths(args)
            data = self._handle(name, {k: v for k, v in args.items() if v is not None})
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

    def _handle(self, name: str, args: dict[str, Any]) -> dict[str, Any]:
        """Run the handler; after one that runs confined code, new git metadata (removed
        there and then) refuses the call, whatever the handler answered."""
        watch = GitMetaWatch(self.project.root) if name in RUNS_CONFINED else None
        try:
            return self._handlers[name](**args)
        finally:
            if watch is not None and watch.found():
                with self._lock:  # a pass earned by such code is no evidence: it must be earned again
                    self._tokens.clear()
                watch.check()

    def record_cancelled(self, name: str) -> None:
        """``tool_cancelled``: the client cancelled the call and its processes were killed."""
        self._audit("tool_cancelled", tool=name, reason="notifications/cancelled from the client")

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

    # -------------------------------------------------------------- files, git

    def _tool_read_file(self, path: str) -> dict[str, Any]:
        return {"path": path, "content": self.workspace.read_file(path)}

    def _tool_list_files(self, path: str = ".") -> dict[str, Any]:
        files = self.workspace.list_files(path)
        return {"path": path, "files": files, "count": len(files)}

    def _tool_write_file(self, path: str, content: str) -> dict[str, Any]:
        return self.workspace.write_file(path, content)

    def _tool_delete_file(self, path: str) -> dict[str, Any]:
        return self.workspace.delete_file(path)

    def _tool_create_directory(self, path: str) -> dict[str, Any]:
        return self.workspace.create_directory(path)

    def _tool_run_tests(self, path: str | None = None) -> dict[str, Any]:
        judges = self.project.protocol.validators_for(self.project.mode, "post_execute")
        with confined(self.project.sandbox_policy(self.project.root)):
            r = run_tests(
                self.project.root,
                path,
                timeout=TEST_TIMEOUT,
                **python_settings(judges, execution_python=self.project.protocol.execution.python),
            )
        return {
            "passed": r.passed,
            "failed_tests": list(r.failed_tests),
            "exit_code": r.exit_code,
            "summary": r.summary,
            "timed_out": r.timed_out,
            "duration": round(r.duration, 3),
            "output_tail": r.output_tail,
        }

    def _tool_read_diff(self, ref: str | None = None, staged: bool = False) -> dict[str, Any]:
        return {"ref": ref, "staged": staged, "diff": self.git.read_diff(ref, staged=staged)}

    def _tool_get_status(self) -> dict[str, Any]:
        return self.git.get_status()

    def _tool_stage_files(self, paths: list[str]) -> dict[str, Any]:
        return self.git.stage_files(paths)

    def _tool_commit(self, message: str) -> dict[str, Any]:
        sha = self.git.commit(message)
        attest_tool_commit(self.project, sha, tool="commit", session_id=self._session_id())
        return {"commit": sha}

    def _tool_create_branch(self, name: str, start: str | None = None) -> dict[str, Any]:
        return self.git.create_branch(name, start)

    def _tool_merge_branch(self, name: str, message: str | None = None) -> dict[str, Any]:
        merged = self.git.merge_branch(name, message)
        attest_tool_commit(self.project, str(merged["head"]), tool="merge_branch", session_id=self._session_id())
        return merged

    def _tool_delete_branch(self, name: str) -> dict[str, Any]:
        return self.git.delete_branch(name)

    # ------------------------------------------------------ validate, dispatch

    def _tool_validate_task(self, task_spec: str | None = None, task_id: str | None = None) -> dict[str, Any]:
        """Without ``task_id`` the id is derived from the spec, as ``dispatch_task`` and the
        CLI do; with only ``task_id``, the spec this server last validated for it is used."""
        if task_spec is None and task_id is None:
            raise ToolError("give task_spec (and optionally task_id), or the task_id of a task validated before")
        if task_id is not None:
            check_task_id(task_id)
        with self._lock:
            if task_spec is not None:
                spec = _spec(task_spec)
                task_id = task_id if task_id is not None else derive_task_id(spec)
            else:
                assert task_id is not None
                previous = self._specs.get(task_id)
                if previous is None:
                    raise ToolError(
                        f"task_spec is required: this server has not validated task {task_id!r} before, so there "
                        "is no spec to validate again"
                    )
                spec = previous
            self._specs[task_id] = spec
            self.project.session()  # the first call that needs a session starts it
        outcome = validate_task(self.project, spec=spec, task_id=task_id, phase="pre_execute")
        if outcome.token is not None:
            with self._lock:
                self._tokens[(outcome.task_id, outcome.spec_sha256)] = outcome.token
        payload = outcome.payload()
        if outcome.status == "pass" and "dispatch_task" not in self.tools:
            payload["instruction"] = AGENT_INSTRUCTION_NO_DISPATCH
        return payload

    def _tool_dispatch_task(self, task_spec: str, task_id: str | None = None) -> dict[str, Any]:
        spec = _spec(task_spec)
        return self._dispatch(spec, check_task_id(task_id) if task_id is not None else derive_task_id(spec))

    def _dispatch(self, spec: str, task_id: str, mode: str | None = None) -> dict[str, Any]:
        """Create and start the job; only then use up the token recorded for this task and spec.

        The token is looked up by (task, spec hash), so a token minted for another task or
        another spec can never be consumed here; a failed start consumes nothing.
        """
        p = self.project
        refusal = p.protocol.cannot_run_tasks(mode or p.mode_id)
        if refusal is not None:
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
            mode=mode or p.mode_id,
            coder=None,
            background=True,
            protocol_path=p.loaded.path.resolve(),
        )
        job_id = str(job["job_id"])
        try:
            self.jobs.launch_ready(max(1, execution.max_parallel_jobs))
            error = self.jobs.load(job_id).get("error") if self.jobs.load(job_id)["status"] == "halted" else None
            if error:
                raise StateError(str(error))
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

    def _tool_get_job_status(self, job_id: str) -> dict[str, Any]:
        return job_view(self.jobs.load(job_id))

    def _tool_list_jobs(self) -> dict[str, Any]:
        jobs = [job_view(j) for j in self.jobs.list()]
        return {"jobs": jobs, "count": len(jobs)}

    # ------------------------------------------------------------------ decide

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

    # ------------------------------------------------------------------- plans

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

    def _plan_mode(self) -> str:
        return plan_mode(self.project.mode)  # the rule the server instructions describe

    def _tool_run_plan(self, plan_id: str) -> dict[str, Any]:
        mode = self._plan_mode()
        with self._plan_lock:
            plan = self.plans.load(plan_id)
            started: list[dict[str, Any]] = []
            earlier = [{"task_id": t["task_id"], "job_id": t["job_id"]} for t in plan["tasks"] if t.get("job_id")]
            for task in plan["tasks"]:
                if task.get("job_id"):
                    continue
                reply = self._dispatch(
                    _spec(str(task["spec"]), "the plan task's spec"), check_task_id(task["task_id"]), mode
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
