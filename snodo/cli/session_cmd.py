"""``snodo session``: the governance sessions of this project (read-only)."""

from __future__ import annotations

from pathlib import Path

import click

from snodo.cli.common import json_option, project_root, protocol_option


@click.group()
def session() -> None:
    """Sessions hold the pending decisions of a project and mode."""


@session.command("list")
@click.option("--all", "all_projects", is_flag=True, help="Sessions of every project, not just this one.")
@protocol_option
@json_option
def list_cmd(all_projects: bool, protocol_path: Path | None, as_json: bool) -> None:
    """List sessions (oldest first)."""
    from snodo.cli.output import console, emit_json
    from snodo.state.home import snodo_home
    from snodo.state.sessions import SessionStore

    root = None if all_projects else project_root(protocol_path)
    sessions = SessionStore(snodo_home()).list(root)
    if as_json:
        emit_json(
            {
                "sessions": [
                    {
                        "session_id": s.session_id,
                        "project_root": s.project_root,
                        "mode": s.mode,
                        "started_at": s.started_at,
                        "status": s.status,
                        "pending_decisions": sorted(s.pending_decisions),
                    }
                    for s in sessions
                ]
            }
        )
        return
    if not sessions:
        console().print("no sessions yet (the first `snodo validate`, `run` or `serve` starts one)")
    for s in sessions:
        console().print(
            f"{s.session_id}  {s.mode:<12} {s.status:<8} {s.started_at}  "
            f"{len(s.pending_decisions)} pending  {s.project_root}"
        )


@session.command("show")
@click.argument("session_id")
@json_option
def show_cmd(session_id: str, as_json: bool) -> None:
    """Show one session and its pending decisions."""
    from snodo.cli.output import console, emit_json
    from snodo.state.atomic import unstructure
    from snodo.state.home import snodo_home
    from snodo.state.sessions import SessionStore

    s = SessionStore(snodo_home()).load(session_id)
    data = unstructure(s)
    if as_json:
        emit_json(data)
        return
    console().print_json(data=data)
