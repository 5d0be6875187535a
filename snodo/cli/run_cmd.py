"""``snodo run``: one task through the governed loop, in the foreground or as a job.

Exit 0 when the run completed (validated evidence of completion), 1 when it halted; the
halt names the outcome, the phase, the validators and what to do next.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import click

from snodo.cli.common import json_option, load_project, protocol_option
from snodo.errors import SnodoError


@click.command()
@click.argument("spec", required=False)
@click.option("--mock", is_flag=True, help="Use the mock coder (no model, no key); validators still judge for real.")
@click.option("--mode", "mode_id", default=None, help="Mode to run in (default: the current mode).")
@click.option("--coder", default=None, help="Coder plugin to use instead of the mode's.")
@click.option("--task-id", default=None, help="Task id (default: derived from the spec text).")
@click.option("--background", is_flag=True, help="Start the run as a background job and print its id.")
@click.option(
    "--resume",
    "resume_task",
    default=None,
    metavar="TASK_ID",
    help="Run a halted task again (after `snodo authorize`); it is validated again.",
)
@click.option("--job", "job_id", default=None, hidden=True, help="Execute a queued background job.")
@protocol_option
@json_option
def run(
    spec: str | None,
    mock: bool,
    mode_id: str | None,
    coder: str | None,
    task_id: str | None,
    background: bool,
    resume_task: str | None,
    job_id: str | None,
    protocol_path: Path | None,
    as_json: bool,
) -> None:
    """Run SPEC (text, @file, or - for stdin) as one governed task.

    \b
    The loop: constraints and pre-execute validators → a single-use token, consumed at
    the execute boundary → the coder → artifact filter → guarded writes committed on a
    task branch (your checkout is never switched) → post-execute validators → completed,
    or a halt: blocker, escalate, validator_error, environment_error, internal_error.

    \b
    Examples:
      snodo run "add a hello module" --mock
      snodo run @task.md --json
      snodo run --resume task-1a2b3c4d5e6f7a8b
    """
    from snodo.cli.output import console, emit_json, err_console
    from snodo.cli.validate_cmd import read_spec
    from snodo.engine.jobs import JobStore
    from snodo.engine.loop import Engine
    from snodo.governance.service import Project, check_task_id, derive_task_id

    try:
        loaded, host = load_project(protocol_path)
    except SnodoError as exc:  # a protocol that does not load: the run could not start
        exc.exit_code = 4
        raise
    jobs = JobStore(loaded.root)
    if mock:
        coder = "mock"
    if job_id is not None:
        job = jobs.load(job_id)
        text = jobs.spec(job_id)
        task_id, mode_id, coder = job["task_id"], job["mode"], job["coder"]
    elif resume_task is not None:
        previous = jobs.latest_for_task(resume_task)
        if previous is None:
            raise SnodoError(
                f"no earlier run of task {resume_task!r} in this project",
                hint="`snodo jobs list` shows runs and their task ids",
            )
        if previous["status"] not in ("halted",):
            raise SnodoError(f"task {resume_task!r} is {previous['status']}; only a halted task can be resumed")
        text = jobs.spec(previous["job_id"])
        task_id = resume_task
        mode_id = mode_id or previous["mode"]
        coder = coder or previous["coder"]
    else:
        text = read_spec(spec)
    project = Project(loaded, host, mode=mode_id)
    refusal = loaded.protocol.cannot_run_tasks(project.mode_id)
    if refusal is not None:
        error = SnodoError(refusal)
        error.exit_code = 4
        raise error
    task_id = check_task_id(task_id) if task_id else derive_task_id(text)
    if job_id is None:
        job = jobs.create(
            spec=text,
            task_id=task_id,
            mode=project.mode_id,
            coder=coder,
            background=background,
            protocol_path=loaded.path,
        )
        job_id = job["job_id"]
        if background:
            jobs.start_background(job_id, cwd=Path.cwd())
            if as_json:
                emit_json({"status": "accepted", "job_id": job_id, "task_id": task_id})
            else:
                console().print(f"started job {job_id} for task {task_id}; follow it with `snodo jobs show {job_id}`")
            return
    jobs.update(job_id, status="running", pid=os.getpid())

    log_path = jobs.log_path(job_id)

    def progress(msg: str) -> None:
        with open(log_path, "a", encoding="utf-8") as fh:
            fh.write(msg + "\n")
        if not as_json:
            err_console().print(f"[dim]· {msg}[/]", markup=True, highlight=False)

    try:
        result = Engine(project, coder=coder, progress=progress, job_id=job_id).run(text, task_id=task_id)
    except BaseException as exc:
        jobs.update(job_id, status="halted", outcome="internal_error", error=str(exc))
        raise
    payload = result.payload()
    jobs.update(job_id, status=result.status, outcome=result.outcome, result=payload)
    if as_json:
        emit_json(payload)
    else:
        render_result(payload)
    raise SystemExit(0 if result.status == "completed" else 1)


def render_result(payload: dict[str, Any]) -> None:
    from rich.markup import escape
    from rich.panel import Panel
    from rich.table import Table

    from snodo.cli.output import console

    ok = payload["status"] == "completed"
    lines = [f"task      {payload['task_id']}  (job {payload['job_id']})"]
    if not ok:
        lines.append(f"outcome   [bold]{payload['outcome']}[/] at {payload['phase']}")
    lines.append(f"why       {escape(payload['message'])}")
    if payload.get("branch"):
        lines.append(
            f"branch    {payload['branch']}" + (f" @ {payload['commit'][:10]}" if payload.get("commit") else "")
        )
    if payload.get("files"):
        lines.append("files     " + ", ".join(payload["files"]))
    if payload.get("dropped"):
        lines.append("refused   " + ", ".join(f"{d['op']} {d['path']}" for d in payload["dropped"]))
    if payload.get("decision_id"):
        lines.append(f"decision  {payload['decision_id']}")
    lines.append(f"next      {escape(payload['next'])}")
    console().print(
        Panel("\n".join(lines), title="completed" if ok else "halted", border_style="green" if ok else "red")
    )
    if payload["validators"]:
        table = Table(show_header=True)
        for col in ("validator", "severity", "justification"):
            table.add_column(col)
        for r in payload["validators"]:
            table.add_row(r["validator_id"], r["severity"], escape(str(r["justification"])[-600:]))
        console().print(table)
