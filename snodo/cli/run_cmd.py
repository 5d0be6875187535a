"""``snodo run``: one task through the governed loop, in the foreground or as a job.

Exit 0 when the run completed (validated evidence of completion), 1 when it halted, 130
when it was interrupted; the halt names the outcome, the phase, the validators and what to
do next. The job's life cycle lives in :mod:`snodo.engine.lifecycle`; this module parses
and prints.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import click

from snodo.cli.common import json_option, load_project, protocol_option


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
    from snodo.engine.lifecycle import JobRunner
    from snodo.errors import SnodoError
    from snodo.governance.service import Project

    try:
        loaded, host = load_project(protocol_path)
    except SnodoError as exc:  # a protocol that does not load: the run could not start
        exc.exit_code = 4
        raise
    runner = JobRunner(loaded, host)
    if mock:
        coder = "mock"
    if job_id is None:  # a claimed job was gated where it was created
        refusal = loaded.protocol.cannot_run_tasks(Project(loaded, host, mode=mode_id).mode_id)
        if refusal is not None:
            error = SnodoError(refusal)
            error.exit_code = 4
            raise error
    if job_id is not None:
        prepared = runner.claim(job_id)
    elif resume_task is not None:
        prepared = runner.resume(resume_task, mode=mode_id, coder=coder, background=background)
    else:
        prepared = runner.new(read_spec(spec), task_id=task_id, mode=mode_id, coder=coder, background=background)
    if background and job_id is None:
        runner.start_background(prepared, cwd=Path.cwd())
        if as_json:
            emit_json({"status": "accepted", "job_id": prepared.job_id, "task_id": prepared.task_id})
        else:
            console().print(
                f"started job {prepared.job_id} for task {prepared.task_id}; "
                f"follow it with `snodo jobs show {prepared.job_id}`"
            )
        return

    def progress(msg: str) -> None:
        if not as_json:
            err_console().print(f"[dim]· {msg}[/]", markup=True, highlight=False)

    result = runner.execute(prepared, echo=progress)
    payload = result.payload()
    if as_json:
        emit_json(payload)
    else:
        render_result(payload)
    if result.outcome == "interrupted":
        raise SystemExit(130)
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
    if payload.get("halted_ref"):
        lines.append(f"kept at   {payload['halted_ref']}  (see `snodo jobs show {payload['job_id']}`)")
    if payload.get("discarded"):
        lines.append("discarded the work: a constraint says it must not be kept (see `snodo jobs show`)")
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
