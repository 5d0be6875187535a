"""``snodo run``: one task through the governed loop, in the foreground or as a job.

Exit 0 when the run completed (validated evidence of completion), 1 when it halted (the
halt names the outcome, the phase, the validators and what to do next), 4 when it could
not start (bad arguments, protocol, state: nothing ran), 130 when it was interrupted. The
job's life cycle lives in :mod:`snodo.engine.lifecycle`; this module parses and prints.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from pathlib import Path
from typing import Any

import click

from snodo.base.errors import SnodoError
from snodo.cli.common import json_option, load_project, protocol_option


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


def _look_ahead(root: Path) -> None:
    from snodo.engine.checkout import look_ahead

    look_ahead(root)


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
    if job_id is not None:  # started by a launcher that waits for this: fork away from it first
        from snodo.engine.jobs import JobStore, detach
        from snodo.protocol import find_protocol, project_root_for

        store = JobStore(project_root_for(find_protocol(Path.cwd(), protocol_path)))
        if branch is not None and store.load(job_id).get("branch") != branch:
            raise SnodoError(f"job {job_id} was created with another branch name; a job keeps the name it was given")
        detach(store, job_id)
    # Reading the user's checkout starts as soon as its repository is pinned, while the rest
    # loads (a job forks first, and a thread would not follow it): engine.checkout.look_ahead.
    ahead = _look_ahead if job_id is None and not background else None
    try:
        loaded, host = load_project(protocol_path, on_pinned=ahead)
    except SnodoError as exc:  # a protocol that does not load: the run could not start
        exc.exit_code = 4
        raise
    from snodo.cli.output import Progress, console, emit_json
    from snodo.cli.validate_cmd import read_spec
    from snodo.engine.lifecycle import JobRunner
    from snodo.engine.worktree import require_repo
    from snodo.governance.service import Project
    from snodo.workspace.interpreter import project_python

    runner = JobRunner(loaded, host)
    if mock:
        coder = "mock"
    if job_id is None:  # a claimed job was gated where it was created
        require_repo(loaded.root)  # outside a git repository nothing can run: exit 4, no job
        refusal = loaded.protocol.cannot_run_tasks(Project(loaded, host, mode=mode_id).mode_id)
        if refusal is not None:
            error = SnodoError(refusal)
            error.exit_code = 4
            raise error
    if job_id is not None:
        prepared = runner.claim(job_id)
    elif resume_task is not None:
        prepared = runner.resume(resume_task, mode=mode_id, coder=coder, background=background, branch=branch)
    else:
        prepared = runner.new(
            read_spec(spec), task_id=task_id, mode=mode_id, coder=coder, background=background, branch=branch
        )
    if background and job_id is None:
        runner.start_background(prepared)
        if as_json:
            emit_json(
                {
                    "status": "accepted",
                    "job_id": prepared.job_id,
                    "task_id": prepared.task_id,
                    "branch_named": prepared.branch,
                }
            )
        else:
            named = f" (completed work goes to branch {prepared.branch})" if prepared.branch else ""
            console().print(f"started job {prepared.job_id} for task {prepared.task_id}{named}", markup=False)
            console().print(
                f"follow it: `snodo jobs show {prepared.job_id}` (its log: `snodo jobs show {prepared.job_id} --log`)",
                markup=False,
            )
        return

    reporter = Progress()
    # A background job's stderr IS its log, which the engine writes already: never a line twice.
    echo = None if prepared.background else reporter
    with reporter:
        result = runner.execute(prepared, echo=echo)
    payload = result.payload()
    used = project_python(loaded.root, loaded.protocol.execution.python)
    payload["python"] = {"path": used.path, "source": used.source}
    payload["branch_named"] = prepared.branch  # what --branch asked for (only completed work gets it)
    if as_json:
        emit_json(payload)
    else:
        render_result(payload)
    if result.outcome == "interrupted":
        raise SystemExit(130)
    raise SystemExit(0 if result.status == "completed" else 1)


def render_result(payload: dict[str, Any]) -> None:
    """The run's result for a person: every value wraps at the terminal width, none is cut.

    Piped or redirected, the same rows are written as plain text (rich is not imported).
    """
    import sys

    from snodo.cli.output import printable, stream_is_terminal

    ok = payload["status"] == "completed"
    # (key, value as plain text, shown in bold): the value is already safe to print
    rows: list[tuple[str, str, bool]] = [("task", printable(f"{payload['task_id']} (job {payload['job_id']})"), False)]
    if not ok:
        rows.append(("outcome", printable(f"{payload['outcome']} at {payload['phase']}"), True))
    rows.append(("why", printable(str(payload["message"])), False))
    if payload.get("branch"):
        commit = f" @ {payload['commit'][:12]}" if payload.get("commit") else ""
        rows.append(("branch", printable(f"{payload['branch']}{commit}"), False))
    elif payload.get("branch_named"):
        rows.append(("branch", printable(f"{payload['branch_named']} not made: only completed work gets it"), False))
    if payload.get("files"):
        rows.append(("files", printable(", ".join(payload["files"])), False))
    if payload.get("dropped"):
        rows.append(("refused", printable(", ".join(f"{d['op']} {d['path']}" for d in payload["dropped"])), False))
    if payload.get("sandbox_refusals"):
        rows.append(("sandbox", printable(sandbox_refusals(payload["sandbox_refusals"])), False))
    if payload.get("halted_ref"):
        kept = f"{payload['halted_ref']}  (see `snodo jobs show {payload['job_id']}`)"
        rows.append(("kept at", printable(kept), False))
    if payload.get("discarded"):
        rows.append(("discarded", "the work: a constraint says it must not be kept (see `snodo jobs show`)", False))
    if payload.get("decision_id"):
        rows.append(("decision", printable(str(payload["decision_id"])), True))
    rows.append(("next", printable(str(payload["next"])), False))
    more = f"full results: `snodo jobs show {payload['job_id']} --json`"
    if not stream_is_terminal(sys.stdout):
        from snodo.cli.output import plain_key_values, plain_results

        blocks = ["completed" if ok else "halted", plain_key_values(rows)]
        if payload["validators"]:
            blocks += ["", plain_results(payload["validators"], more=more)]
        sys.stdout.write("\n".join(blocks) + "\n")
        sys.stdout.flush()
        return
    from rich.panel import Panel
    from rich.text import Text

    from snodo.cli.output import console, key_values, results_table

    grid = key_values([(key, Text(value, style="bold" if bold else "")) for key, value, bold in rows])
    console().print(Panel(grid, title="completed" if ok else "halted", border_style="green" if ok else "red"))
    if payload["validators"]:
        console().print(results_table(payload["validators"], more=more))


def sandbox_refusals(refusals: list[dict[str, Any]]) -> str:
    """The writes the sandbox refused, one per line, for a person (each path is agent text:
    the caller escapes the whole)."""
    lines = [f"refused {r.get('path')} ({r.get('error')}; reported by {r.get('reported_by')})" for r in refusals]
    return "\n".join(lines) + "\n(each is a `sandbox_refusal` audit event)"
