"""``snodo jobs``: runs recorded under .snodo/jobs/ (read-only)."""

from __future__ import annotations

from pathlib import Path

import click

from snodo.cli.common import json_option, project_root, protocol_option


@click.group()
def jobs() -> None:
    """Runs and background jobs of this project."""


@jobs.command("list")
@protocol_option
@json_option
def list_cmd(protocol_path: Path | None, as_json: bool) -> None:
    """List jobs, oldest first."""
    from snodo.cli.output import console, emit_json, listing
    from snodo.engine.jobs import JobStore

    rows = JobStore(project_root(protocol_path)).list()
    if as_json:
        emit_json({"jobs": rows})
        return
    if not rows:
        console().print("no jobs yet (`snodo run` records each run as a job)")
        return
    columns = ("job", "task", "status", "outcome", "mode", "created")
    console().print(
        listing(
            columns,
            [
                (j["job_id"], j["task_id"], j["status"], j.get("outcome") or "", j["mode"], j["created_at"])
                for j in rows
            ],
            keep_whole=("job", "task"),
        )
    )
    console().print("details: `snodo jobs show JOB`; its log: `snodo jobs show JOB --log`")


@jobs.command("show")
@click.argument("job_id")
@click.option("--log", "show_log", is_flag=True, help="Print the job's log as plain text (with --json: add it).")
@protocol_option
@json_option
def show_cmd(job_id: str, show_log: bool, protocol_path: Path | None, as_json: bool) -> None:
    """Show one job's status, outcome and result."""
    import sys

    from snodo.cli.output import console, emit_json, key_values
    from snodo.cli.run_cmd import render_result
    from snodo.engine.jobs import JobStore

    store = JobStore(project_root(protocol_path))
    job = store.load(job_id)
    log = store.log_path(job_id)
    if as_json:
        if show_log:
            job["log"] = log.read_text(encoding="utf-8", errors="replace") if log.exists() else ""
        emit_json(job)
        return
    if show_log:
        if log.exists():
            sys.stdout.write(log.read_text(encoding="utf-8", errors="replace"))
            sys.stdout.flush()
        else:
            console().print(f"job {job_id} has no log yet")
        return
    from rich.text import Text

    rows = [
        ("job", Text(str(job["job_id"]), style="bold")),
        ("task", Text(str(job["task_id"]))),
        ("status", Text(str(job["status"]) + (f" ({job['outcome']})" if job.get("outcome") else ""))),
        ("mode", Text(str(job["mode"]))),
        ("coder", Text(str(job.get("coder") or "the mode's coder"))),
        ("created", Text(str(job["created_at"]))),
        ("updated", Text(str(job.get("updated_at") or ""))),
        ("log", Text(str(log))),
    ]
    if job.get("error"):
        rows.append(("error", Text(str(job["error"]))))
    console().print(key_values(rows))
    if job.get("result"):
        render_result(job["result"])
    elif job["status"] in ("queued", "running"):
        console().print(f"still {job['status']}; follow it with `snodo jobs show {job_id} --log`")
