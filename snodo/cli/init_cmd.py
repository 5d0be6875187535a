"""``snodo init``: write ``.snodo/protocol.yml`` and, in a git repository, the project state
(:mod:`snodo.state.runtime`). Commits nothing."""

from __future__ import annotations

from pathlib import Path

import click
from attrs import asdict

from snodo.base.errors import SnodoError
from snodo.cli.common import dir_option, json_option
from snodo.cli.output import console, emit_json
from snodo.git.runner import pin
from snodo.protocol import parse_protocol
from snodo.protocol.templates import TEMPLATES, template_text
from snodo.state.atomic import atomic_write_text
from snodo.state.sessions import ProjectState, save_project_state


@click.command()
@click.option(
    "--template",
    type=click.Choice(list(TEMPLATES)),
    default="solo",
    show_default=True,
    help="solo: one producer; team: producer/reviewer/planner; 2+n: quorum and predicate constraints.",
)
@click.option("--force", is_flag=True, help="Overwrite an existing .snodo/protocol.yml.")
@dir_option("directory", "Project directory (default: the current one).", default=Path("."))
@json_option
def init(template: str, force: bool, directory: Path, as_json: bool) -> None:
    """Write .snodo/protocol.yml from a template and record the initial mode.

    Nothing is committed and no branch is touched: review the protocol, then commit it
    yourself. Refuses to overwrite an existing protocol without --force.
    """
    root = directory.resolve()
    if not root.is_dir():
        raise SnodoError(f"{root}: no such directory")
    target = root / ".snodo" / "protocol.yml"
    if target.exists() and not force:
        raise SnodoError(f"{target} already exists", hint="pass --force to overwrite it")
    text = _with_python_comment(template_text(template))
    proto = parse_protocol(text, source=f"template {template}")
    target.parent.mkdir(parents=True, exist_ok=True)
    atomic_write_text(target, text)
    in_git = pin(root) is not None
    if in_git:  # else the first run after `git init` starts in the protocol's initial mode
        save_project_state(root, ProjectState(current_mode=proto.start_mode, active_sessions=()))
    from snodo.workspace.interpreter import project_python  # noqa: PLC0415 the interpreter search only once the protocol is written

    python = project_python(root)
    if as_json:
        emit_json(
            {
                "path": str(target),
                "template": template,
                "initial_mode": proto.start_mode,
                "git_repository": in_git,
                "python": asdict(python),
            }
        )
        return
    console().print(f"[green]wrote[/] {target} (template {template!r}, initial mode {proto.start_mode!r})")
    if not in_git:
        console().print("[yellow]note:[/] this directory is not a git repository; `git init` before `snodo run`.")
    console().print(
        "next: `snodo protocol check`, then commit .snodo/ (`git add .snodo && git commit -m 'snodo protocol'`): "
        'the committed protocol is the one in force. Then `snodo run "<task>" --mock` tries it without a model.'
    )
    console().print(
        f"interpreter here: {python.path} (from {python.source}); not written into the protocol, "
        "which every machine shares",
        markup=False,
    )
    console().print("how to write a task spec, and which acceptance criteria are checked mechanically: docs/tasks.md")


#: Why ``execution.python`` is left out: the committed file names nothing of this machine.
PYTHON_COMMENT = (
    "python: left unset on purpose: each machine finds the project's interpreter at run time "
    "(docs/protocol.md); `snodo doctor` shows which"
)


def _with_python_comment(text: str) -> str:
    if "\nexecution:\n" in text:
        return text.replace("\nexecution:\n", f"\nexecution:\n  # {PYTHON_COMMENT}\n", 1)
    return text.rstrip("\n") + f"\n# execution:\n#   {PYTHON_COMMENT}\n"
