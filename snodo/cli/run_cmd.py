"""``snodo run``: one task through the governed loop, in the foreground or as a job.

Exit 0 when the run completed (validated evidence of completion), 1 when it halted (the
halt names the outcome, the phase, the validators and what to do next), 4 when it could
not start (bad arguments, protocol, state: nothing ran).
"""

from __future__ import annotations

import functools
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

import click

from snodo.cli.common import json_option, load_project, protocol_option
from snodo.errors import SnodoError


def _could_not_start(func: Callable[..., None]) -> Callable[..., None]:
    """A SnodoError reaching the command line means the run never got going: exit 4.

    The engine turns every fault of a started run into a halt (exit 1); what escapes it is
    a failure to load the protocol, read the spec, open the state or start the job.
    """

    @functools.wraps(func)
    def wrapper(*args: Any, **kwargs: Any) -> None:
        try:
            func(*args, **kwargs)
        except SnodoError as exc:
            exc.exit_code = 4
            raise

    return wrapper


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
@_could_not_start
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
    """Run SPEC as one governed task. SPEC is text, @FILE, - (stdin), or @@text for
    text that itself starts with @.

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

    \b
    Exit codes: 0 completed, 1 halted, 4 could not start, 130 interrupted.
    Progress goes to stderr (`snodo -q run …` silences it).
    """
    from snodo.cli.output import Progress, console, emit_json
    from snodo.cli.validate_cmd import read_spec
    from snodo.engine.jobs import JobStore
    from snodo.engine.loop import Engine
    from snodo.governance.service import Project, check_task_id, derive_task_id

    loaded, host = load_project(protocol_path)
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
                console().print(f"started job {job_id} for task {task_id}")
                console().print(f"follow it: `snodo jobs show {job_id}` (its log: `snodo jobs show {job_id} --log`)")
            return
    jobs.update(job_id, status="running", pid=os.getpid())

    log_path = jobs.log_path(job_id)
    reporter = Progress()
    queued = bool(job.get("background"))  # a queued job's stderr IS its log: never write a line twice

    def progress(msg: str) -> None:
        with open(log_path, "a", encoding="utf-8") as fh:
            fh.write(msg + "\n")
        if not queued:
            reporter(msg)

    try:
        with reporter:
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
    """The run's result for a person: every value wraps at the terminal width, none is cut."""
    from rich.markup import escape
    from rich.panel import Panel
    from rich.text import Text

    from snodo.cli.output import console, key_values, printable, results_table

    ok = payload["status"] == "completed"
    rows: list[tuple[str, Any]] = [("task", Text(f"{payload['task_id']} (job {payload['job_id']})"))]
    if not ok:
        rows.append(("outcome", Text.from_markup(f"[bold]{escape(str(payload['outcome']))}[/] at {payload['phase']}")))
    rows.append(("why", Text(printable(str(payload["message"])))))
    if payload.get("branch"):
        commit = f" @ {payload['commit'][:12]}" if payload.get("commit") else ""
        rows.append(("branch", Text(f"{payload['branch']}{commit}")))
    if payload.get("files"):
        rows.append(("files", Text(printable(", ".join(payload["files"])))))
    if payload.get("dropped"):
        refused = ", ".join(f"{d['op']} {d['path']}" for d in payload["dropped"])
        rows.append(("refused", Text(printable(refused))))
    if payload.get("decision_id"):
        rows.append(("decision", Text(str(payload["decision_id"]), style="bold")))
    rows.append(("next", Text(printable(str(payload["next"])))))
    console().print(
        Panel(key_values(rows), title="completed" if ok else "halted", border_style="green" if ok else "red")
    )
    if payload["validators"]:
        console().print(
            results_table(payload["validators"], more=f"full results: `snodo jobs show {payload['job_id']} --json`")
        )
