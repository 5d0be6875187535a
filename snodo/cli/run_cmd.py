"""``snodo run``: one task through the governed loop, in the foreground or as a job
(:mod:`snodo.engine.lifecycle`); this module parses and prints. The engine turns every fault
of a started run into a halt (exit 1): what escapes it could not start (exit 4)."""

from __future__ import annotations

from pathlib import Path
from typing import Any, NoReturn

import click
from attrs import asdict

from snodo.base.errors import SnodoError
from snodo.base.text import shown
from snodo.cli.common import could_not_run, load_project, project_options, read_spec
from snodo.cli.output import (
    Progress,
    console,
    emit_json,
    key_values,
    plain_key_values,
    plain_results,
    plain_stdout,
    results_table,
)


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
@click.option(
    "--branch",
    default=None,
    metavar="NAME",
    help="Name the branch completed work is left on (default: snodo/<task>-<run>). Checked first: "
    "an invalid or existing name is refused (exit 4) before anything runs. A halted run makes no "
    "branch (its commits are kept under refs/snodo/halted/); --resume keeps the name.",
)
@click.option("--job", "job_id", default=None, hidden=True, help="Execute a queued background job.")
@project_options
@could_not_run
def run(
    spec: str | None,
    mock: bool,
    mode_id: str | None,
    coder: str | None,
    task_id: str | None,
    background: bool,
    resume_task: str | None,
    branch: str | None,
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
    or a halt: blocker, escalate, validator_error, coder_failed, environment_error,
    internal_error.

    \b
    Examples:
      snodo run "add a hello module" --mock
      snodo run @task.md --json
      snodo run @task.md --mock --branch feature/hello
      snodo run --resume task-1a2b3c4d5e6f7a8b

    \b
    Exit codes: 0 completed, 1 halted, 4 could not start, 130 interrupted.
    Progress goes to stderr (`snodo -q run …` silences it).
    """
    from snodo.engine.checkout import look_ahead  # noqa: PLC0415 `run --help` stays light

    store = _detached(job_id, branch, protocol_path) if job_id is not None else None
    # the checkout is read while the rest loads (not in a job: it forks, and a thread would not follow)
    ahead = look_ahead if job_id is None and not background else None
    try:
        loaded, host = load_project(protocol_path, on_pinned=ahead)
    except SnodoError as exc:  # a protocol that does not load: the run could not start
        if store is not None:  # the job says so itself, rather than leaving a dead pid behind
            store.update(job_id, status="halted", outcome="environment_error", error=f"could not start: {exc}")
        raise
    from snodo.engine.lifecycle import JobRunner  # noqa: PLC0415 `run --help` stays light; the checkout is read meanwhile

    runner = JobRunner(loaded, host)
    if job_id is not None:  # a claimed job was gated where it was created
        prepared = runner.claim(job_id)
    else:
        coder = "mock" if mock else coder
        prepared = _prepare(
            runner, spec, task_id, resume_task, mode=mode_id, coder=coder, background=background, branch=branch
        )
    if background and job_id is None:
        runner.start_background(prepared)
        _report_started(prepared, as_json)
        return
    _execute(runner, prepared, as_json)


def _detached(job_id: str, branch: str | None, protocol_path: Path | None) -> Any:
    """The store of queued job ``job_id``, once this process is detached from its launcher."""
    from snodo.engine.jobs import JobStore, detach  # noqa: PLC0415 `run --help` stays light; the checkout is read meanwhile
    from snodo.protocol import find_protocol, project_root_for  # noqa: PLC0415 only a detached job reads its project this way

    store = JobStore(project_root_for(find_protocol(Path.cwd(), protocol_path)))
    if branch is not None and store.load(job_id).get("branch") != branch:
        raise SnodoError(f"job {job_id} was created with another branch name; a job keeps the name it was given")
    detach(store, job_id)
    return store


def _prepare(runner: Any, spec: str | None, task_id: str | None, resume_task: str | None, **options: Any) -> Any:
    """A new or resumed run, once the repository and the mode are known to be able to run it."""
    from snodo.engine.worktree import require_repo  # noqa: PLC0415 `run --help` stays light; the checkout is read meanwhile
    from snodo.governance.service import Project  # noqa: PLC0415 `run --help` stays light; the checkout is read meanwhile

    loaded = runner.loaded
    require_repo(loaded.root)  # outside a git repository nothing can run: exit 4, no job
    refusal = loaded.protocol.cannot_run_tasks(Project(loaded, runner.host, mode=options["mode"]).mode_id)
    if refusal is not None:
        raise SnodoError(refusal)
    if resume_task is not None:
        return runner.resume(resume_task, **options)
    return runner.new(read_spec(spec), task_id=task_id, **options)


def _report_started(prepared: Any, as_json: bool) -> None:
    if as_json:
        emit_json(
            {
                "status": "accepted",
                "job_id": prepared.job_id,
                "task_id": prepared.task_id,
                "branch_named": prepared.branch,
            }
        )
        return
    named = f" (completed work goes to branch {prepared.branch})" if prepared.branch else ""
    click.echo(f"started job {prepared.job_id} for task {prepared.task_id}{named}")
    click.echo(f"follow it: `snodo jobs show {prepared.job_id}` (its log: `snodo jobs show {prepared.job_id} --log`)")


def _execute(runner: Any, prepared: Any, as_json: bool) -> NoReturn:
    from snodo.workspace.interpreter import project_python  # noqa: PLC0415 `run --help` stays light; the checkout is read meanwhile

    reporter = Progress()
    # A background job's stderr IS its log, which the engine writes already: never a line twice.
    echo = None if prepared.background else reporter
    with reporter:
        result = runner.execute(prepared, echo=echo)
    payload = result.payload()
    payload["python"] = asdict(project_python(runner.loaded.root, runner.loaded.protocol.execution.python))
    payload["branch_named"] = prepared.branch  # what --branch asked for (only completed work gets it)
    if as_json:
        emit_json(payload)
    else:
        render_result(payload)
    if result.outcome == "interrupted":
        raise SystemExit(130)
    raise SystemExit(0 if result.status == "completed" else 1)


def render_result(payload: dict[str, Any]) -> None:
    """The run's result, every value whole; piped, the same rows as plain text without rich."""
    ok = payload["status"] == "completed"
    rows = [("task", f"{payload['task_id']} (job {payload['job_id']})")]
    if not ok:
        rows.append(("outcome", f"{payload['outcome']} at {payload['phase']}"))
    rows.append(("why", str(payload["message"])))
    if payload.get("branch"):
        commit = f" @ {payload['commit'][:12]}" if payload.get("commit") else ""
        rows.append(("branch", f"{payload['branch']}{commit}"))
    elif payload.get("branch_named"):
        rows.append(("branch", f"{payload['branch_named']} not made: only completed work gets it"))
    if payload.get("files"):
        rows.append(("files", ", ".join(payload["files"])))
    if payload.get("dropped"):
        rows.append(("refused", ", ".join(f"{d['op']} {d['path']}" for d in payload["dropped"])))
    if payload.get("sandbox_refusals"):
        rows.append(("sandbox", sandbox_refusals(payload["sandbox_refusals"])))
    if payload.get("halted_ref"):
        rows.append(("kept at", f"{payload['halted_ref']}  (see `snodo jobs show {payload['job_id']}`)"))
    if payload.get("discarded"):
        rows.append(("discarded", "the work: a constraint says it must not be kept (see `snodo jobs show`)"))
    if payload.get("decision_id"):
        rows.append(("decision", str(payload["decision_id"])))
    rows.append(("next", str(payload["next"])))
    rows = [(key, shown(value)) for key, value in rows]
    title, more = "completed" if ok else "halted", f"full results: `snodo jobs show {payload['job_id']} --json`"
    if plain_stdout():
        blocks = [title, plain_key_values(rows)]
        if payload["validators"]:
            blocks += ["", plain_results(payload["validators"], more=more)]
        print("\n".join(blocks), flush=True)
        return
    from rich.panel import Panel  # noqa: PLC0415 rich only for a person
    from rich.text import Text  # noqa: PLC0415 rich only for a person

    grid = key_values(
        [(key, Text(value, style="bold" if key in ("outcome", "decision") else "")) for key, value in rows]
    )
    console().print(Panel(grid, title=title, border_style="green" if ok else "red"))
    if payload["validators"]:
        console().print(results_table(payload["validators"], more=more))


def sandbox_refusals(refusals: list[dict[str, Any]]) -> str:
    """The writes the sandbox refused, one a line (agent text: the caller escapes the whole)."""
    lines = [f"refused {r.get('path')} ({r.get('error')}; reported by {r.get('reported_by')})" for r in refusals]
    return "\n".join(lines) + "\n(each is a `sandbox_refusal` audit event)"
