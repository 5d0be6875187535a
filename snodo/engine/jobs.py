"""Jobs: every run has a directory ``.snodo/jobs/<job_id>/`` (spec, status, log).

A foreground ``snodo run`` records itself as a job too, so ``snodo jobs`` and
``--resume`` see every run. A background job is ``snodo run --job ID`` started detached;
its status is written atomically by the process doing the work. A job whose process
died without finishing is reported halted (``internal_error``), never "running" forever.
This module is the store; what a run does with its job (queueing, interrupts, recording
the result, pruning) is :mod:`snodo.engine.lifecycle`.
"""

from __future__ import annotations

import os
import secrets
import subprocess
import sys
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Final, Literal, get_args

from snodo.errors import StateError
from snodo.outcomes import HALT_OUTCOMES
from snodo.state.atomic import atomic_write_json, atomic_write_text, file_lock, read_json

JobStatus = Literal["queued", "running", "completed", "halted"]
JOB_STATUSES: Final[tuple[JobStatus, ...]] = get_args(JobStatus)


def _now() -> str:
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
        self.root = project
        self.directory = project / ".snodo" / "jobs"

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
            "status": "queued",
            "outcome": None,
            "pid": None,
            "created_at": _now(),
            "created_ns": time.time_ns(),  # orders the queue: oldest waiting job first
            "updated_at": _now(),
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
        """Change a job's record; a ``status`` or ``outcome`` outside the known ones is a bug, refused."""
        if "status" in changes and changes["status"] not in JOB_STATUSES:
            raise StateError(f"job {job_id}: {changes['status']!r} is not a job status ({', '.join(JOB_STATUSES)})")
        if changes.get("outcome") is not None and changes["outcome"] not in HALT_OUTCOMES:
            raise StateError(f"job {job_id}: {changes['outcome']!r} is not a halt outcome")
        path = self.path(job_id) / "status.json"
        with file_lock(path):
            status = dict(read_json(path))
            status.update(changes, updated_at=_now())
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

    def latest_for_task(self, task_id: str) -> dict[str, Any] | None:
        found = [j for j in self.list() if j["task_id"] == task_id]
        return found[-1] if found else None

    def start_background(self, job_id: str, *, cwd: Path, env: dict[str, str] | None = None) -> int:
        """Start ``snodo run --job ID`` detached; its output goes to the job log.

        The job runs under the protocol it was created with (``--protocol``), not whatever
        ``.snodo/protocol.yml`` the child would find from ``cwd``.
        """
        argv = [sys.executable, "-m", "snodo", "run", "--job", job_id]
        protocol = self.load(job_id).get("protocol")
        if protocol:
            argv += ["--protocol", str(protocol)]
        log = open(self.log_path(job_id), "ab")  # noqa: SIM115 - handed to the child
        try:
            proc = subprocess.Popen(
                argv,
                cwd=cwd,
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,
                env={**os.environ, **(env or {})},
            )
        finally:
            log.close()
        self.update(job_id, pid=proc.pid)
        return proc.pid
