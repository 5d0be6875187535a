"""``snodo validate``: one phase of the mode's validators on a task spec, no coder.

Exit codes: 0 pass, 1 blocker, 2 escalate, 3 validator_error, 4 could not run.
"""

from __future__ import annotations

import sys
from pathlib import Path

import click

from snodo.cli.common import json_option, load_project, protocol_option
from snodo.errors import SnodoError

EXIT = {"pass": 0, "blocker": 1, "escalate": 2, "validator_error": 3}


def read_spec(spec: str | None) -> str:
    """A spec is literal text, ``@file``, or ``-`` for stdin."""
    if spec is None or spec == "-":
        if sys.stdin.isatty() and spec is None:
            raise SnodoError("no task spec given", hint='pass it as text, @file.md, or "-" to read stdin')
        text = sys.stdin.read()
    elif spec.startswith("@"):
        path = Path(spec[1:])
        try:
            text = path.read_text(encoding="utf-8")
        except OSError as exc:
            raise SnodoError(f"cannot read the spec file {path}: {exc}") from None
    else:
        text = spec
    if not text.strip():
        raise SnodoError("the task spec is empty")
    return text


@click.command()
@click.argument("spec", required=False)
@click.option("--phase", type=click.Choice(["pre_execute", "post_execute"]), default="pre_execute", show_default=True)
@click.option("--mode", "mode_id", default=None, help="Mode whose validators run (default: the current mode).")
@click.option("--task-id", default=None, help="Task id (default: derived from the spec text).")
@click.option(
    "--base",
    default="HEAD",
    show_default=True,
    help="post_execute only: the commit the work is compared with (staged, unstaged and untracked files count).",
)
@protocol_option
@json_option
def validate(
    spec: str | None,
    phase: str,
    mode_id: str | None,
    task_id: str | None,
    base: str,
    protocol_path: Path | None,
    as_json: bool,
) -> None:
    """Validate SPEC (text, @file, or - for stdin) with the mode's validators for one phase.

    \b
    Outcomes and exit codes:
      0 pass             a single-use token was recorded for this task and spec
      1 blocker          fix the work; no human can override it
      2 escalate         a human runs `snodo authorize <decision_id>`, then validate again
      3 validator_error  a validator could not judge; fix the setup or retry
      4                  could not run (bad protocol, state, arguments)

    After the work (--phase post_execute) the validators judge the working tree's change
    set against --base: staged, unstaged and untracked files (ignored ones excluded).
    """
    from snodo.cli.output import console, emit_json
    from snodo.governance.service import Project, validate_task

    try:
        text = read_spec(spec)
        loaded, host = load_project(protocol_path)
        project = Project(loaded, host, mode=mode_id)
        progress = None
        if not as_json:
            progress = lambda msg, _r: console().print(f"[dim]· {msg}[/]")  # noqa: E731
        changed: tuple[str, ...] = ()
        diff = ""
        if phase == "post_execute":
            from snodo.workspace.changes import working_tree_changes

            changes = working_tree_changes(project.root, base)
            changed, diff = changes.changed_files, changes.diff
            if progress is not None:
                progress(f"change set against {base}: {len(changed)} file(s)", None)
        outcome = validate_task(
            project,
            spec=text,
            task_id=task_id,
            phase=phase,
            changed_files=changed,
            diff=diff,
            progress=progress,
        )
    except SnodoError as exc:
        exc.exit_code = 4
        raise
    payload = outcome.payload()
    if as_json:
        emit_json(payload)
    else:
        render_outcome(payload)
    raise SystemExit(EXIT[outcome.status])


def render_outcome(payload: dict[str, object]) -> None:
    from rich.markup import escape
    from rich.table import Table

    from snodo.cli.output import console

    colour = {"pass": "green", "escalate": "yellow", "blocker": "red", "validator_error": "magenta"}
    status = str(payload["status"])
    table = Table(show_header=True, header_style="bold")
    for col in ("validator", "type", "severity", "justification"):
        table.add_column(col)
    for r in payload["results"]:  # type: ignore[attr-defined]
        sev = r["severity"] + (f" (was {r['severity_original']})" if r.get("severity_original") else "")
        table.add_row(r["validator_id"], r["validator_type"], sev, escape(str(r["justification"])[:300]))
    console().print(table)
    pol = payload["policy"]
    console().print(
        f"[bold {colour.get(status, 'white')}]{status}[/] task {payload['task_id']} — "
        f"{pol['name']}: {pol['pass_count']}/{pol['total']} passed, {pol['required']} required"  # type: ignore[index]
    )
    console().print(escape(str(payload["instruction"])))
