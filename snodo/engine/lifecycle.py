"""A run as a job: created, queued, running, then completed or halted; ``snodo run``, its
``--background`` and ``dispatch_task`` (``snodo run --job ID``) all follow this one path. A
background job waits ``queued`` for one of ``max_parallel_jobs`` slots (an ``flock`` each)."""

from __future__ import annotations

import contextlib
import itertools
import os
import re
import time
from collections.abc import Callable, Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import TYPE_CHECKING, Any

from attrs import frozen

from snodo.base.errors import SnodoError
from snodo.engine.interrupt import Interrupted, InterruptState, interruptible
from snodo.engine.jobs import QUEUED, JobStore, now
from snodo.engine.loop import Engine
from snodo.engine.pool import try_lock
from snodo.engine.refused import RefusalWatch
from snodo.engine.results import RunResult
from snodo.engine.worktree import prune_copies, prune_halted
from snodo.rules.taskids import check_task_id, derive_task_id
from snodo.state.audit import AuditLog
from snodo.state.runtime import audit_log_path
from snodo.workspace.interpreter import project_python

if TYPE_CHECKING:
    from snodo.governance.service import Project
    from snodo.plugin.host import PluginHost
    from snodo.protocol import LoadedProtocol

Echo = Callable[[str], None]

#: How long a queued job sleeps between looks for a free slot.
QUEUE_POLL = 0.2

#: ``snodo jobs prune`` removes what is older than this unless told otherwise.
DEFAULT_PRUNE_AGE = timedelta(days=14)


@frozen(kw_only=True)
class PreparedRun:
    job_id: str
    task_id: str
    spec: str
    mode: str
    coder: str | None
    background: bool
    #: the branch completed work gets (``run --branch``); ``None``: ``snodo/<task>-<run>``
    branch: str | None = None


def _prepared(job: dict[str, Any], spec: str) -> PreparedRun:
    given = {name: job[name] for name in ("job_id", "task_id", "mode", "coder")}
    return PreparedRun(**given, spec=spec, background=bool(job.get("background")), branch=job.get("branch"))


class JobRunner:
    def __init__(self, loaded: LoadedProtocol, host: PluginHost) -> None:
        self.loaded = loaded
        self.host = host
        self.jobs = JobStore(loaded.root)

    def new(
        self,
        spec: str,
        *,
        task_id: str | None,
        mode: str | None,
        coder: str | None,
        background: bool,
        branch: str | None = None,
    ) -> PreparedRun:
        """A new job for ``spec``; a named ``branch`` is checked before the job exists."""

        project = self._project(mode)
        task = check_task_id(task_id) if task_id else derive_task_id(spec)
        if branch is not None:  # imported only when a name is given: the plain run path stays lean
            from snodo.engine.branches import check_branch  # noqa: PLC0415 only a run with --branch checks one

            check_branch(self.loaded.root, branch, self.jobs)
        if background:
            self.jobs.check_room(self.loaded.protocol.execution.max_queued_jobs)
        job = self.jobs.create(
            spec=spec,
            task_id=task,
            mode=project.mode_id,
            coder=coder,
            background=background,
            protocol_path=self.loaded.path,
            branch=branch,
        )
        return _prepared(job, spec)

    def resume(
        self, task_id: str, *, mode: str | None, coder: str | None, background: bool, branch: str | None = None
    ) -> PreparedRun:
        """A new job running a halted task's spec again, validated from scratch (its branch name kept)."""
        found = [j for j in self.jobs.list() if j["task_id"] == task_id]
        if not found:
            raise SnodoError(
                f"no earlier run of task {task_id!r} in this project",
                hint="`snodo jobs list` shows runs and their task ids",
            )
        previous = found[-1]
        if previous["status"] != "halted":
            raise SnodoError(f"task {task_id!r} is {previous['status']}; only a halted task can be resumed")
        return self.new(
            self.jobs.spec(previous["job_id"]),
            task_id=task_id,
            mode=mode or previous["mode"],
            coder=coder or previous["coder"],
            background=background,
            branch=branch or previous.get("branch"),
        )

    def claim(self, job_id: str) -> PreparedRun:
        """The queued job ``snodo run --job ID`` was started to execute."""
        job = self.jobs.load(job_id)
        if job["status"] != "queued":
            raise SnodoError(f"job {job_id} is {job['status']}, not queued; it cannot be run again")
        return _prepared(job, self.jobs.spec(job_id))

    def start_background(self, run: PreparedRun) -> list[str]:
        """Queue the job as a record and start what the free slots allow (oldest first)."""
        return self.jobs.launch_ready(self.parallel_limit())

    def parallel_limit(self) -> int:
        return max(1, int(self.loaded.protocol.execution.max_parallel_jobs))

    def execute(self, run: PreparedRun, *, echo: Echo | None = None) -> RunResult:
        """Run the job to its end, never leaving it ``running``; a fault outside the engine is raised."""
        log_path = self.jobs.log_path(run.job_id)
        refusals = RefusalWatch()  # what the coder reports the sandbox refused

        def progress(msg: str) -> None:
            refusals.see(msg)
            with open(log_path, "a", encoding="utf-8") as fh:
                fh.write(msg + "\n")
            if echo is not None:
                echo(msg)

        project = self._project(run.mode)
        progress(f"project interpreter: {project_python(project.root, project.protocol.execution.python).describe()}")
        with interruptible() as stop:
            try:
                slot = self._slot(run, project, progress) if run.background else contextlib.nullcontext()
                with slot:
                    self.jobs.update(run.job_id, status="running", pid=os.getpid(), started_at=now())
                    try:
                        engine = Engine(
                            project, coder=run.coder, progress=progress, job_id=run.job_id, branch=run.branch
                        )
                        result = refusals.settle(project, engine.run(run.spec, task_id=run.task_id))
                    except Interrupted as exc:  # outside the engine's own handling
                        result = self._interrupted_outside(run, project, exc)
                    self._record(run, result, stop)  # while the slot is held: never two "running" too many
            except Interrupted as exc:  # while queued
                result = self._interrupted_outside(run, project, exc)
                self._record(run, result, stop)
            except BaseException as exc:
                self.jobs.update(run.job_id, status="halted", outcome="internal_error", error=str(exc) or repr(exc))
                raise
            finally:
                if run.background:  # the slot is free: the finishing job starts the next waiting one
                    with contextlib.suppress(SnodoError, OSError):
                        self.jobs.launch_ready(self.parallel_limit())
        return result

    def _record(self, run: PreparedRun, result: RunResult, stop: InterruptState) -> None:
        changes: dict[str, Any] = {"status": result.status, "outcome": result.outcome, "result": result.payload()}
        if result.outcome == "interrupted":
            changes["interrupted"] = {
                "signal": stop.signal_name,
                "phase": result.phase,
                "during": result.message,
                "processes": [" ".join(argv)[:500] for argv in stop.processes],
            }
        self.jobs.update(run.job_id, finished_at=now(), **changes)

    def _interrupted_outside(self, run: PreparedRun, project: Project, exc: Interrupted) -> RunResult:
        """An interrupt that came while queued (or between the engine's steps)."""
        status = self.jobs.load(run.job_id)["status"]
        phase = "queued" if status == "queued" else "engine"
        message = f"interrupted by {exc.signal_name} while {'queued' if phase == 'queued' else 'finishing'}"
        project.record(
            "halt", task_id=run.task_id, job_id=run.job_id, outcome="interrupted", phase=phase, message=message
        )
        return RunResult(
            status="halted", task_id=run.task_id, outcome="interrupted", phase=phase, message=message, job_id=run.job_id
        )

    @contextlib.contextmanager
    def _slot(self, run: PreparedRun, project: Project, progress: Echo) -> Iterator[int]:
        """Wait ``queued`` for a free slot, oldest job first; hold it."""
        limit = self.parallel_limit()
        directory = self.jobs.directory / ".slots"
        directory.mkdir(parents=True, exist_ok=True)
        self.jobs.update(run.job_id, status="queued", pid=os.getpid())
        for waited in itertools.count():
            for n in range(limit if self._first_in_line(run.job_id) else 0):
                fd = try_lock(directory / f"slot-{n}.lock")
                if fd is None:
                    continue
                try:
                    yield n
                finally:
                    os.close(fd)
                return
            if not waited:
                progress(QUEUED.format(limit=limit))
            time.sleep(QUEUE_POLL)

    def _first_in_line(self, job_id: str) -> bool:
        """Whether no older job of this project is waiting for a slot (FIFO)."""
        waiting = [
            j
            for j in self.jobs.list()
            if j["status"] == "queued" and j.get("background") and j.get("pid") and j["job_id"] != job_id
        ]
        mine = self.jobs.load(job_id)
        key = (mine.get("created_ns") or 0, job_id)
        return not any((j.get("created_ns") or 0, j["job_id"]) < key for j in waiting)

    def _project(self, mode: str | None) -> Project:
        from snodo.governance.service import Project  # noqa: PLC0415 `jobs prune` loads no protocol or governance stack

        return Project(self.loaded, self.host, mode=mode)


_DURATION = re.compile(r"^\s*(\d+)\s*([smhdw]?)\s*$")
_UNITS = {"s": "seconds", "m": "minutes", "h": "hours", "d": "days", "w": "weeks", "": "days"}


def parse_duration(text: str) -> timedelta:
    """``14d``, ``12h``, ``30m``, ``90s``, ``2w`` (a bare number is days)."""
    match = _DURATION.match(text)
    if not match:
        raise SnodoError(
            f"{text!r} is not a duration",
            hint="use a number and a unit: 90s, 30m, 12h, 14d or 2w (a bare number is days)",
        )
    return timedelta(**{_UNITS[match.group(2)]: int(match.group(1))})


def prune(root: Path, home: Path, *, older_than: timedelta = DEFAULT_PRUNE_AGE) -> dict[str, Any]:
    """Remove what is past ``older_than`` and the task branches already merged, never what a live job uses."""
    from snodo.engine.branches import made_branches, prune_merged  # noqa: PLC0415 only prune asks which branches snodo made

    cutoff = datetime.now(UTC) - older_than
    jobs = JobStore(root)
    made = made_branches(jobs)  # read before old job records go: they say which branches snodo made
    refs = prune_halted(root, before=cutoff)
    gone = jobs.remove_finished(before=cutoff)
    worktrees = prune_copies(root, home, older_than=older_than)
    branches = prune_merged(root, made)
    if refs or gone or worktrees or branches:
        AuditLog(audit_log_path(root)).append(
            "pruned",
            mode=None,
            data={
                "halted_refs": refs,
                "jobs": gone,
                "worktrees": [w["run_id"] for w in worktrees],
                "branches": [b["branch"] for b in branches],
            },
        )
    return {
        "older_than_seconds": int(older_than.total_seconds()),
        "halted_refs": refs,
        "jobs": gone,
        "worktrees": worktrees,
        "branches": branches,
    }
