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
    from snodo.cli.output import console, emit_json, listing
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
        return
    columns = ("session", "mode", "status", "started", "pending", "project")
    rows = [
        (s.session_id, s.mode, s.status, s.started_at, str(len(s.pending_decisions)), s.project_root) for s in sessions
    ]
    console().print(listing(columns, rows, keep_whole=("session",)))
    console().print("details: `snodo session show SESSION`")


@session.command("show")
@click.argument("session_id")
@json_option
def show_cmd(session_id: str, as_json: bool) -> None:
    """Show one session and its pending decisions."""
    from snodo.cli.output import console, emit_json, key_values, listing
    from snodo.state.atomic import unstructure
    from snodo.state.home import snodo_home
    from snodo.state.sessions import SessionStore

    s = SessionStore(snodo_home()).load(session_id)
    data = unstructure(s)
    if as_json:
        emit_json(data)
        return
    from rich.text import Text

    console().print(
        key_values(
            [
                ("session", Text(s.session_id, style="bold")),
                ("project", Text(s.project_root)),
                ("mode", Text(s.mode)),
                ("status", Text(s.status)),
                ("started", Text(s.started_at)),
                ("pending", Text(f"{len(s.pending_decisions)} decision(s)")),
            ]
        )
    )
    if s.pending_decisions:
        rows = [
            (p.decision_id, p.task_id, p.phase, ", ".join(p.warned_validators()), p.created_at)
            for p in s.pending_decisions.values()
        ]
        console().print(
            listing(("decision", "task", "phase", "warned", "created"), rows, keep_whole=("decision", "task"))
        )
        console().print("review and decide with `snodo authorize DECISION`")
