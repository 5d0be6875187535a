"""``snodo jobs``: the project's recorded runs (``.git/snodo/jobs/``); ``prune`` removes what is past its age."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import click

from snodo.base.text import shown
from snodo.cli.common import project_options, project_root
from snodo.cli.output import console, emit_json, listing
from snodo.state.home import snodo_home


@click.group(invoke_without_command=True)
@project_options
@click.pass_context
def jobs(ctx: click.Context, protocol_path: Path | None, as_json: bool) -> None:
    """Runs and background jobs of this project (without a command: `snodo jobs list`)."""
    if ctx.invoked_subcommand is None:
        ctx.invoke(list_cmd, protocol_path=protocol_path, as_json=as_json)


@jobs.command("list")
@project_options
def list_cmd(protocol_path: Path | None, as_json: bool) -> None:
    """List jobs, oldest first."""
    from snodo.engine.jobs import JobStore  # noqa: PLC0415 `jobs --help` stays light

    rows = JobStore(project_root(protocol_path)).list()
    if as_json:
        emit_json({"jobs": rows})
        return
    if not rows:
        console().print("no jobs yet (`snodo run` records each run as a job)")
        return
    columns = ("job", "task", "status", "outcome", "mode", "created")
    shown_rows = [
        (j["job_id"], j["task_id"], j["status"], j.get("outcome") or "", j["mode"], j["created_at"]) for j in rows
    ]
    console().print(listing(columns, shown_rows, keep_whole=("job", "task")))
    console().print("details: `snodo jobs show JOB`; its log: `snodo jobs show JOB --log`")


@jobs.command("show")
@click.argument("job_id")
@click.option("--log", "show_log", is_flag=True, help="Print the job's log as plain text (with --json: add it).")
@project_options
def show_cmd(job_id: str, show_log: bool, protocol_path: Path | None, as_json: bool) -> None:
    """Show one job's status, outcome and result."""
    from snodo.engine.jobs import JobStore  # noqa: PLC0415 `jobs --help` stays light

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
            print(shown(log.read_text(encoding="utf-8", errors="replace")), end="", flush=True)
        else:
            click.echo(f"job {job_id} has no log yet")
        return
    click.echo(shown("\n".join([*describe_job(job), f"log       {log}"])))
    if job["status"] in ("queued", "running"):
        click.echo(f"still {job['status']}; follow it with `snodo jobs show {job_id} --log`")


def describe_job(job: dict[str, Any]) -> list[str]:
    """A job for a person: state, what became of its work and how to look at it."""
    result = job.get("result") or {}
    lines = [
        f"job       {job['job_id']}",
        f"task      {job['task_id']}  (mode {job['mode']})",
        f"status    {job['status']}" + (f" — {job['outcome']}" if job.get("outcome") else ""),
        f"created   {job['created_at']}   updated {job['updated_at']}",
    ]
    return lines + _why_lines(job, result) + _work_lines(job, result)


def _why_lines(job: dict[str, Any], result: dict[str, Any]) -> list[str]:
    """Where the job stopped and why: the phase, what halted it (each cause), an error, a signal."""
    lines = [f"phase     {result['phase']}"] if result.get("phase") else []
    if result.get("message"):
        lines.append(f"why       {result['message']}")
    for v in result.get("validators") or ():
        if v.get("severity") != "pass":  # what halted the run, each with its cause
            lines += _judged(v)
    if job.get("error"):
        lines.append(f"error     {job['error']}")
    stop = job.get("interrupted")
    if stop:
        lines.append(f"stopped   by {stop.get('signal')} during {stop.get('during')}")
        lines += [f"          killed: {argv}" for argv in stop.get("processes") or ()]
    return lines


def _judged(v: dict[str, Any]) -> list[str]:
    cause = str(v.get("justification") or v.get("error") or "").strip().splitlines() or [""]
    return [f"judged    {v.get('validator_id')} ({v.get('severity')}): {cause[0]}"] + [
        f"          {line}" for line in cause[1:8]
    ]


def _discarded(discarded: dict[str, Any]) -> list[str]:
    lines = ["discarded the run's work: no commit of it was kept, because"]
    for c in discarded.get("constraints") or ():
        lines.append(f"          {c.get('constraint')} ({c.get('predicate')}): {c.get('finding')}")
    if discarded.get("files"):
        lines.append(f"  files:  {', '.join(discarded['files'])}")
    return lines


def _branch(job: dict[str, Any], result: dict[str, Any]) -> list[str]:
    if result.get("branch"):
        return [f"branch    {result['branch']}" + (f" @ {result['commit']}" if result.get("commit") else "")]
    if job.get("branch"):
        done = "not made: only completed work gets it" if job["status"] == "halted" else "if the run completes"
        return [f"branch    {job['branch']} ({done})"]
    return []


def _work_lines(job: dict[str, Any], result: dict[str, Any]) -> list[str]:
    """What became of the job's work, and how to look at it."""
    lines = _branch(job, result)
    for r in (result.get("sandbox_refusals") or ())[:20]:
        lines.append(f"sandbox   refused {r.get('path')} ({r.get('error')}; reported by {r.get('reported_by')})")
    ref = result.get("halted_ref")
    if ref:
        lines += [
            f"kept at   {ref}  (not a branch: `git branch` and `git push --all` leave it out)",
            f"  look:   git show {ref}",
            f"  diff:   git diff HEAD...{ref}",
            f"  keep:   git branch NAME {ref}",
        ]
    if result.get("discarded"):
        lines += _discarded(result["discarded"])
    elif result.get("files"):
        lines.append(f"files     {', '.join(result['files'])}")
    lines += [
        f"{key:<10}{result[name]}" for key, name in (("decision", "decision_id"), ("next", "next")) if result.get(name)
    ]
    return lines


@jobs.command("prune")
@click.option(
    "--older-than",
    "older_than",
    default="14d",
    show_default=True,
    metavar="DURATION",
    help="Remove what is older than this: 90s, 30m, 12h, 14d, 2w.",
)
@project_options
def prune_cmd(older_than: str, protocol_path: Path | None, as_json: bool) -> None:
    """Remove halted refs, finished job directories and leftover working copies past their age.

    \b
    Halted refs age by their commit's date, job directories by their last update. At any
    age: working copies of runs whose process is gone (their commits kept under
    refs/snodo/halted/ first), and task branches snodo made (snodo/…, or `run --branch`
    where snodo left it) merged into another local branch. Running and queued jobs stay.
    """
    from snodo.engine.lifecycle import parse_duration, prune  # noqa: PLC0415 `jobs --help` stays light

    removed = prune(project_root(protocol_path), snodo_home(), older_than=parse_duration(older_than))
    if as_json:
        emit_json(removed)
        return
    total = sum(len(removed[k]) for k in ("halted_refs", "jobs", "worktrees", "branches"))
    if not total:
        click.echo(f"nothing to prune (nothing older than {older_than})")
        return
    for ref in removed["halted_refs"]:
        click.echo(f"removed halted ref   {ref}")
    for job_id in removed["jobs"]:
        click.echo(f"removed job          {job_id}")
    for wt in removed["worktrees"]:
        kept = f" (its commits kept at {wt['halted_ref']})" if wt.get("halted_ref") else ""
        click.echo(f"removed working copy {wt['path']}{kept}")
    for b in removed["branches"]:
        click.echo(f"removed branch       {b['branch']} (merged into {b['merged_into']})")
