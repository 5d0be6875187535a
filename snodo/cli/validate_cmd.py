"""``snodo validate``: one phase of the mode's validators on a task spec, no coder."""

from __future__ import annotations

import shlex
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import click

from snodo.base.errors import SnodoError
from snodo.cli.common import could_not_run, load_project, project_options, read_spec
from snodo.cli.output import Progress, console, emit_json, results_table
from snodo.git.runner import run_git
from snodo.rules.outcomes import EXIT_CODE, PERSON_SUMMARY, VALIDATE_NEXT_STEP, VALIDATE_POST_NEXT_STEP

_HELP = """Validate SPEC with the mode's validators for one phase. SPEC is text, @FILE, -
(stdin), or @@text for text that itself starts with @.

\b
Outcomes and exit codes:
{codes}
  4                  could not run (bad protocol, state, arguments)

After the work (--phase post_execute) the validators judge the working tree's change
set against --base: staged, unstaged and untracked files (ignored ones excluded).

\b
Progress goes to stderr (`snodo -q validate …` silences it). The JSON payload keeps
the `instruction` meant for an agent; the text output says what to do next here.
""".format(
    codes="\n".join(
        f"  {code} {outcome:<16} {PERSON_SUMMARY[outcome]}"
        for outcome, code in sorted(EXIT_CODE.items(), key=lambda i: i[1])
    )
)


@click.command(help=_HELP)
@click.argument("spec", required=False)
@click.option("--phase", type=click.Choice(["pre_execute", "post_execute"]), default="pre_execute", show_default=True)
@click.option("--mode", "mode_id", default=None, help="Mode whose validators run (default: the current mode).")
@click.option("--task-id", default=None, help="Task id (default: derived from the spec text).")
@click.option(
    "--base",
    default=None,
    help="The commit the work is judged against (default: the merge base with the upstream branch, else "
    "the HEAD at which the session started). Commits made since, staged, unstaged and untracked files "
    "are all part of the judged change.",
)
@project_options
@could_not_run
def validate(
    spec: str | None,
    phase: str,
    mode_id: str | None,
    task_id: str | None,
    base: str | None,
    protocol_path: Path | None,
    as_json: bool,
) -> None:
    """See ``_HELP`` (built from the outcome wording in snodo/rules/outcomes.py)."""
    from snodo.governance.service import Project, default_base  # noqa: PLC0415 `validate --help` stays light

    text = read_spec(spec)
    loaded, host = load_project(protocol_path, refuse_drift=False)
    project = Project(loaded, host, mode=mode_id)
    with Progress() as progress:
        changed: tuple[str, ...] = ()
        diff = ""
        against = _resolved_base(project, base) if base is not None else default_base(project)
        if phase == "post_execute" and against is not None:
            from snodo.workspace.changes import working_tree_changes  # noqa: PLC0415 `validate --help` stays light

            changes = working_tree_changes(project.root, against)
            changed, diff = changes.changed_files, changes.diff
            progress(f"change set against {against[:12]}: {len(changed)} file(s)")
        outcome = _validate_watched(
            project, phase, progress, spec=text, task_id=task_id, changed_files=changed, diff=diff, base=against
        )
    payload = outcome.payload()
    if as_json:
        emit_json(payload)
    else:
        options = [("--phase", phase if phase != "pre_execute" else None), ("--mode", mode_id)]
        render_outcome(payload, spec, [*options, ("--task-id", task_id), ("--base", base)])
    raise SystemExit(EXIT_CODE[outcome.status])


def _validate_watched(project: Any, phase: str, progress: Any, **request: Any) -> Any:
    """:func:`validate_task`; a ``.git`` entry the validators' confined code planted (in the
    tree, or in a validator's own copy of it) is recorded as a refused path and refused."""
    from snodo.governance.service import validate_task  # noqa: PLC0415 `validate --help` stays light
    from snodo.workspace.gitmeta import GitMetadataRefused, GitMetaWatch  # noqa: PLC0415 `validate --help` stays light

    watch = GitMetaWatch(project.root)
    try:
        outcome = validate_task(project, phase=phase, progress=progress, **request)
    except GitMetadataRefused as exc:
        _record_refused(project, phase, exc.found)
        raise
    _record_refused(project, phase, watch.found())
    watch.check()
    return outcome


def _record_refused(project: Any, phase: str, found: Iterable[tuple[str, str]]) -> None:
    for path, reason in found:
        project.record("path_refused", path=path, reason=reason, source=f"{phase}:validators")


def _resolved_base(project: Any, base: str) -> str:
    """The commit ``--base`` names, or a clear refusal (exit 4)."""
    if base.startswith("-"):
        raise SnodoError(f"--base {base!r} is not a revision")
    found = run_git(project.root, "rev-parse", "--verify", "--quiet", f"{base}^{{commit}}")
    if not found.ok or not found.stdout.strip():
        raise SnodoError(f"--base {base!r} names no commit in {project.root}")
    return found.stdout.strip()


def render_outcome(payload: dict[str, Any], spec: str | None, options: list[tuple[str, str | None]]) -> None:
    from rich.markup import escape  # noqa: PLC0415 rich only for a person

    colour = {"pass": "green", "escalate": "yellow", "blocker": "red", "validator_error": "magenta"}
    status = str(payload["status"])
    console().print(results_table(list(payload["results"]), with_type=True))
    pol = payload["policy"]
    console().print(
        f"[bold {colour.get(status, 'white')}]{status}[/] task {payload['task_id']} — "
        f"{escape(str(pol['name']))}: {pol['pass_count']}/{pol['total']} passed, {pol['required']} required"
    )
    console().print(escape(next_steps(payload, spec, options)))


def next_steps(payload: dict[str, Any], spec: str | None, options: list[tuple[str, str | None]]) -> str:
    """Exact commands for the person at the terminal, with the options given (JSON keeps the agent's)."""
    status = payload["status"]
    same = "".join(f" {name} {shlex.quote(value)}" for name, value in options if value)
    again = (f"snodo validate {_shell_spec(spec)}" if spec is not None else "snodo validate SPEC") + same
    run = f"snodo run {_shell_spec(spec)}" if spec is not None else "snodo run SPEC"
    steps = VALIDATE_POST_NEXT_STEP if payload.get("phase") == "post_execute" else VALIDATE_NEXT_STEP
    text = steps.get(status, VALIDATE_NEXT_STEP["validator_error"])
    return text.format(decision_id=payload.get("decision_id"), again=again, run=run)


def _shell_spec(spec: str) -> str:
    """How the person passes the same spec again: the form they used when it was short."""
    if spec.startswith("@") or spec == "-":
        return spec
    return shlex.quote(spec) if len(spec) <= 60 and "\n" not in spec else '"<the same spec>"'
