"""``snodo session``: the governance sessions of this project; ``close`` ends them."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import click

from snodo.base.errors import SnodoError
from snodo.cli.common import audit_event, json_option, project_options, project_root
from snodo.cli.output import console, emit_json, key_values, listing
from snodo.state.home import snodo_home


@click.group()
def session() -> None:
    """Sessions hold the pending decisions of a project and mode."""


def _store() -> Any:
    from snodo.state.sessions import SessionStore  # noqa: PLC0415 `session --help` stays light

    return SessionStore(snodo_home())


#: A session's fields in `session list --json`, then its pending decisions' ids.
LISTED = ("session_id", "project_root", "mode", "started_at", "status", "last_active_at", "ended_at")


@session.command("list")
@click.option("--all", "all_projects", is_flag=True, help="Sessions of every project, not just this one.")
@project_options
def list_cmd(all_projects: bool, protocol_path: Path | None, as_json: bool) -> None:
    """List sessions (oldest first)."""
    root = None if all_projects else project_root(protocol_path)
    sessions = _store().list(root)
    if as_json:
        listed = [
            {f: getattr(s, f) for f in LISTED} | {"pending_decisions": sorted(s.pending_decisions)} for s in sessions
        ]
        emit_json({"sessions": listed})
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
    from snodo.state.atomic import unstructure  # noqa: PLC0415 `session --help` stays light

    s = _store().load(session_id)
    if as_json:
        emit_json(unstructure(s))
        return
    from rich.text import Text  # noqa: PLC0415 rich only for a person

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


@session.command("close")
@click.argument("session_id", required=False)
@click.option(
    "--drop-pending",
    is_flag=True,
    help="Also drop the decisions still waiting in the session (they can no longer be authorised).",
)
@project_options
def close_cmd(session_id: str | None, drop_pending: bool, protocol_path: Path | None, as_json: bool) -> None:
    """Close SESSION_ID, or every active session of this project.

    \b
    A session holding a pending decision is not closed unless --drop-pending says its
    decisions may go: a person may still have to decide them with `snodo authorize`.
    Every close is recorded in the project's audit log.
    """
    from snodo.state.sessions import ACTIVE  # noqa: PLC0415 `session --help` stays light

    root = project_root(protocol_path)
    store = _store()
    closed = [_close(store, s) for s in _closable(store, session_id, root, drop_pending)]
    if closed and not [s for s in store.list(root) if s.status == ACTIVE]:
        from snodo.engine.worktree import drop_pool  # noqa: PLC0415 the engine's working-copy pool only when the last session closes

        drop_pool(root, snodo_home())  # no session left: the idle working copies go too
    if as_json:
        emit_json({"closed": closed})
        return
    if not closed:
        click.echo("no active session to close")
    for c in closed:
        extra = f" (dropped pending decisions: {', '.join(c['dropped_decisions'])})" if c["dropped_decisions"] else ""
        click.echo(f"closed {c['session_id']}  {c['mode']}{extra}")


def _closable(store: Any, session_id: str | None, root: Path, drop_pending: bool) -> list[Any]:
    """The session named, or every active one of the project; refused while a decision waits
    in one of them, unless ``drop_pending``."""
    from snodo.state.sessions import ACTIVE  # noqa: PLC0415 `session --help` stays light

    if session_id is not None:
        chosen = [store.load(session_id).current()]
        if chosen[0].status != ACTIVE:
            raise SnodoError(f"session {session_id} is already {chosen[0].status}")
    else:
        chosen = [s for s in store.list(root) if s.status == ACTIVE]
    waiting = [s for s in chosen if s.pending_decisions]
    if waiting and not drop_pending:
        names = ", ".join(f"{s.session_id} ({', '.join(sorted(s.pending_decisions))})" for s in waiting)
        raise SnodoError(
            f"not closed: decisions are still waiting in {names}",
            hint="decide them with `snodo authorize`, or close with --drop-pending to drop them",
        )
    return chosen


def _close(store: Any, s: Any) -> dict[str, Any]:
    """End session ``s`` and drop its pending decisions; audited in its project when there is one."""
    dropped = sorted(s.pending_decisions)
    for decision_id in dropped:
        store.remove_pending(s.session_id, decision_id)
    store.end(s.session_id)
    if (Path(s.project_root) / ".snodo").is_dir():
        audit_event(
            Path(s.project_root),
            "session_closed",
            mode=s.mode,
            data={"session_id": s.session_id, "dropped_decisions": dropped},
        )
    return {"session_id": s.session_id, "mode": s.mode, "dropped_decisions": dropped}
