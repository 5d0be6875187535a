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
    from snodo.cli.output import console, emit_json
    from snodo.engine.jobs import JobStore

    rows = JobStore(project_root(protocol_path)).list()
    if as_json:
        emit_json({"jobs": rows})
        return
    if not rows:
        console().print("no jobs yet")
    for j in rows:
        console().print(
            f"{j['job_id']}  {j['task_id']}  {j['status']:<9} {j.get('outcome') or '':<17} "
            f"{j['mode']}  {j['created_at']}"
        )


@jobs.command("show")
@click.argument("job_id")
@click.option("--log", "show_log", is_flag=True, help="Print the job's log too.")
@protocol_option
@json_option
def show_cmd(job_id: str, show_log: bool, protocol_path: Path | None, as_json: bool) -> None:
    """Show one job's status, outcome and result."""
    from snodo.cli.output import console, emit_json
    from snodo.engine.jobs import JobStore

    store = JobStore(project_root(protocol_path))
    job = store.load(job_id)
    if show_log:
        job["log"] = store.log_path(job_id).read_text(encoding="utf-8", errors="replace")
    if as_json:
        emit_json(job)
        return
    console().print_json(data=job)
