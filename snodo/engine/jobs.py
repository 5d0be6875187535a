"""The job store: every run has a directory ``jobs/<job_id>/`` (spec, status, log) in the
project's runtime state. A job whose process died without finishing is reported halted
(``internal_error``), never "running" forever.
"""

from __future__ import annotations

import builtins
import os
import secrets
import shutil
import subprocess
import sys
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Final, Literal, get_args

from snodo.base.errors import SnodoError, StateError
from snodo.rules.outcomes import HALT_OUTCOMES
from snodo.sandbox.base import not_adopting
from snodo.state.atomic import atomic_write_json, atomic_write_text, file_lock, read_json
from snodo.state.runtime import runtime_dir

JobStatus = Literal["queued", "running", "completed", "halted"]
JOB_STATUSES: Final[tuple[JobStatus, ...]] = get_args(JobStatus)
#: What a background job waiting for a slot says in its log.
QUEUED = "queued: at most {limit} job(s) run at once (max_parallel_jobs); waiting for a slot"


def now() -> str:
    return datetime.now(UTC).isoformat(timespec="seconds")


def _alive(pid: int | None) -> bool:
    if not pid:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    # A zombie child of ours counts as dead.
    try:
        with open(f"/proc/{pid}/stat") as fh:
            return fh.read().split(")")[-1].split()[0] != "Z"
    except OSError:
        return True


class JobStore:
    def __init__(self, project: Path) -> None:
        self.directory = runtime_dir(project) / "jobs"

    def path(self, job_id: str) -> Path:
        if not job_id.replace("-", "").isalnum():
            raise StateError(f"{job_id!r} is not a valid job id")
        return self.directory / job_id

    def create(
        self,
        *,
        spec: str,
        task_id: str,
        mode: str,
        coder: str | None,
        background: bool,
        protocol_path: Path | None = None,
        branch: str | None = None,
    ) -> dict[str, Any]:
        job_id = f"job-{datetime.now(UTC):%Y%m%d%H%M%S}-{secrets.token_hex(3)}"
        d = self.path(job_id)
        d.mkdir(parents=True, exist_ok=False)
        atomic_write_text(d / "spec.md", spec)
        status = {
            "job_id": job_id,
            "task_id": task_id,
            "mode": mode,
            "coder": coder,
            "protocol": str(protocol_path) if protocol_path else None,
            "background": background,
            "branch": branch,  # the name completed work gets (`run --branch`); None: snodo/<task>-<run>
            "status": "queued",
            "outcome": None,
            "pid": None,
            "created_at": now(),
            "created_ns": time.time_ns(),  # orders the queue: oldest waiting job first
            "updated_at": now(),
            "result": None,
        }
        atomic_write_json(d / "status.json", status)
        (d / "log.txt").touch()
        return status

    def spec(self, job_id: str) -> str:
        return (self.path(job_id) / "spec.md").read_text(encoding="utf-8")

    def log_path(self, job_id: str) -> Path:
        return self.path(job_id) / "log.txt"

    def update(self, job_id: str, **changes: Any) -> dict[str, Any]:
        """Change a job's record (an unknown ``status`` or ``outcome`` is refused)."""
        if "status" in changes and changes["status"] not in JOB_STATUSES:
            raise StateError(f"job {job_id}: {changes['status']!r} is not a job status ({', '.join(JOB_STATUSES)})")
        if changes.get("outcome") is not None and changes["outcome"] not in HALT_OUTCOMES:
            raise StateError(f"job {job_id}: {changes['outcome']!r} is not a halt outcome")
        path = self.path(job_id) / "status.json"
        with file_lock(path):
            status = dict(read_json(path))
            status.update(changes, updated_at=now())
            atomic_write_json(path, status)
        return status

    def load(self, job_id: str) -> dict[str, Any]:
        path = self.path(job_id) / "status.json"
        if not path.exists():
            raise StateError(f"no job {job_id!r} (looked for {path})", hint="`snodo jobs list` shows jobs")
        status = dict(read_json(path))
        if status["status"] in ("queued", "running") and status.get("pid") and not _alive(status["pid"]):
            status.update(
                status="halted",
                outcome="internal_error",
                error="the job's process ended without recording a result; see log.txt",
            )
        return status

    def list(self) -> list[dict[str, Any]]:
        if not self.directory.is_dir():
            return []
        return [self.load(p.name) for p in sorted(self.directory.iterdir()) if (p / "status.json").exists()]

    def remove_finished(self, *, before: datetime) -> builtins.list[str]:
        gone = []
        for job in self.list():
            try:
                updated = datetime.fromisoformat(str(job.get("updated_at")))
            except ValueError:
                continue
            if job["status"] in ("completed", "halted") and updated.replace(tzinfo=updated.tzinfo or UTC) < before:
                shutil.rmtree(self.path(job["job_id"]))
                gone.append(job["job_id"])
        return gone

    def waiting(self) -> builtins.list[dict[str, Any]]:
        """Background jobs queued as records (no process yet), oldest first."""
        found = [j for j in self.list() if j.get("background") and j["status"] == "queued" and not j.get("pid")]
        return sorted(found, key=lambda j: (j.get("created_ns") or 0, j["job_id"]))

    def active(self) -> builtins.list[dict[str, Any]]:
        return [j for j in self.list() if j.get("background") and j["status"] in ("queued", "running") and j.get("pid")]

    def check_room(self, max_queued: int) -> None:
        waiting = len(self.waiting())
        if waiting >= max_queued:
            raise QueueFull(
                f"the job queue is full: {waiting} job(s) already wait for a slot "
                f"(execution.max_queued_jobs is {max_queued}); nothing was started or used",
                hint="wait for a job to finish (list_jobs / `snodo jobs list`), then dispatch again",
            )

    def launch_ready(self, limit: int) -> builtins.list[str]:
        """Start the oldest waiting jobs while fewer than ``limit`` are alive (a queued job is only a record)."""
        started: builtins.list[str] = []
        if not self.directory.is_dir():
            return started
        with file_lock(self.directory / ".launch"):
            free = max(0, limit - len(self.active()))
            for job in self.waiting()[:free]:
                job_id = str(job["job_id"])
                try:
                    self.start_background(job_id)
                except (OSError, SnodoError) as exc:
                    self.update(job_id, status="halted", outcome="internal_error", error=f"could not start: {exc}")
                    continue
                started.append(job_id)
            for job in self.waiting():
                log = self.log_path(str(job["job_id"]))
                if log.stat().st_size == 0:
                    with open(log, "a", encoding="utf-8") as fh:
                        fh.write(QUEUED.format(limit=limit) + "\n")
        return started

    def start_background(self, job_id: str) -> int:
        """Start ``python -I -m snodo run --job ID`` from ``/`` (nothing the agent wrote is on
        its ``sys.path``), its output to the job log. It forks the job and exits
        (:func:`detach`), so no kill of the server's process tree reaches the job; that holds
        only while this process is no child subreaper (:func:`not_adopting`)."""
        argv = [sys.executable, "-I", "-m", "snodo", "run", "--job", job_id]
        protocol = self.load(job_id).get("protocol")
        if protocol:
            argv += ["--protocol", str(protocol)]
        with not_adopting(ADOPTION_WAIT):
            log = open(self.log_path(job_id), "ab")  # noqa: SIM115 - handed to the child
            try:
                proc = subprocess.Popen(
                    argv,
                    cwd="/",  # never the workspace: nothing there may be imported or read as config
                    stdin=subprocess.DEVNULL,
                    stdout=log,
                    stderr=subprocess.STDOUT,
                    start_new_session=True,
                )
            finally:
                log.close()
            # The job writes its own pid before the launcher exits.
            if proc.wait(timeout=LAUNCH_TIMEOUT) != 0:
                raise StateError(f"the job process exited with status {proc.returncode} before it started; see its log")
        return int(self.load(job_id).get("pid") or 0)


def detach(store: JobStore, job_id: str) -> None:
    """Before any thread exists: fork, and end the parent once the child recorded its pid (never a dead launcher)."""
    read_end, write_end = os.pipe()
    pid = os.fork()
    if pid:  # the launcher: wait for the job to say it is recorded, then vanish
        os.close(write_end)
        ok = os.read(read_end, 1) == b"1"
        os._exit(0 if ok else 1)
    os.close(read_end)
    try:
        store.update(job_id, pid=os.getpid())
        os.write(write_end, b"1")
    finally:
        os.close(write_end)


class QueueFull(StateError):
    """``execution.max_queued_jobs`` jobs already wait: a new one is refused, nothing is used."""


#: Seconds the launcher may take to fork the job and record it (python start-up plus a write).
LAUNCH_TIMEOUT = 30.0
#: Seconds a launch waits, at most, for the confined runs of this process to end.
ADOPTION_WAIT = 600.0
