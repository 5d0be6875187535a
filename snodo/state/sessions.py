"""Sessions (``$SNODO_HOME/sessions/<id>.json``) and project state (``.snodo/state.json``).

A session is where an escalation waits for a human: ``validate_task`` persists a
:class:`PendingDecision` before it answers, and ``snodo authorize`` (another process,
possibly much later) finds it by id. Every change is a locked read-modify-write of one
file followed by an atomic replace, so concurrent validators never lose each other's
pending decisions.
"""

from __future__ import annotations

import builtins
import re
import secrets
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from attrs import Factory, evolve, frozen

from snodo.errors import DecisionError, StateError
from snodo.state.atomic import file_lock, load_record, save_record
from snodo.state.home import project_state_dir, sessions_dir

_SESSION_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_-]{0,63}$")
ACTIVE = "active"


@frozen(kw_only=True)
class PendingDecision:
    """An escalation awaiting a human: what was validated, what each validator said, and why
    the policy could not approve. ``results`` and ``policy`` keep the payload shape of
    ``validate_task`` (SPEC §3) so ``snodo authorize`` renders exactly what was decided on."""

    decision_id: str
    task_id: str
    spec_sha256: str
    mode: str
    phase: str
    results: tuple[dict[str, Any], ...]
    policy: dict[str, Any]
    created_at: str
    spec_text: str
    tree: str = ""  # the git tree a post_execute escalation judged; a decision binds to it

    def blocking_validators(self) -> tuple[str, ...]:
        """Validators whose result forbids authorisation (INV3): a blocker or an error.

        Fails closed: any severity other than ``pass``/``warn`` counts as blocking.
        """
        return tuple(
            str(r.get("validator_id"))
            for r in self.results
            if r.get("error") or r.get("severity") not in ("pass", "warn")
        )

    def warned_validators(self) -> tuple[str, ...]:
        """Validators whose ``warn`` a human is asked to adjudicate."""
        return tuple(str(r.get("validator_id")) for r in self.results if r.get("severity") == "warn")


@frozen(kw_only=True)
class Session:
    session_id: str
    project_root: str
    mode: str
    started_at: str
    status: str
    pending_decisions: dict[str, PendingDecision] = Factory(dict)


@frozen(kw_only=True)
class ProjectState:
    """``.snodo/state.json``: the project's current mode and the sessions it has open."""

    current_mode: str | None = None
    active_sessions: tuple[str, ...] = ()


def _root(project_root: Path | str) -> str:
    return str(Path(project_root).resolve())


class SessionStore:
    """Session files under ``$SNODO_HOME/sessions/``."""

    def __init__(self, home: Path) -> None:
        self.directory = sessions_dir(home)

    def path(self, session_id: str) -> Path:
        if not _SESSION_ID.match(session_id):
            raise StateError(f"{session_id!r} is not a valid session id")
        return self.directory / f"{session_id}.json"

    def create(self, project_root: Path | str, mode: str) -> Session:
        started = datetime.now(UTC)
        session = Session(
            session_id=f"{started:%Y%m%dT%H%M%S}-{secrets.token_hex(4)}",
            project_root=_root(project_root),
            mode=mode,
            started_at=started.isoformat(timespec="seconds"),
            status=ACTIVE,
        )
        save_record(self.path(session.session_id), session)
        return session

    def load(self, session_id: str) -> Session:
        path = self.path(session_id)
        try:
            return load_record(path, Session)
        except FileNotFoundError:
            raise StateError(
                f"no session {session_id!r} (looked for {path})", hint="`snodo session list` shows sessions"
            ) from None

    def exists(self, session_id: str) -> bool:
        return self.path(session_id).exists()

    def _update(self, session_id: str, change: Callable[[Session], Session]) -> Session:
        path = self.path(session_id)
        with file_lock(path):
            session = change(self.load(session_id))
            save_record(path, session)
        return session

    def add_pending(self, session_id: str, pending: PendingDecision) -> Session:
        """Persist an escalation; must complete before the escalation is reported."""
        return self._update(
            session_id,
            lambda s: evolve(s, pending_decisions={**s.pending_decisions, pending.decision_id: pending}),
        )

    def remove_pending(self, session_id: str, decision_id: str) -> PendingDecision:
        removed: list[PendingDecision] = []

        def change(session: Session) -> Session:
            remaining = dict(session.pending_decisions)
            if decision_id not in remaining:
                raise DecisionError(f"session {session_id} has no pending decision {decision_id!r}")
            removed.append(remaining.pop(decision_id))
            return evolve(session, pending_decisions=remaining)

        self._update(session_id, change)
        return removed[0]

    def pending(self, project_root: Path | str) -> builtins.list[tuple[Session, PendingDecision]]:
        """Every pending decision of the project's sessions, oldest first."""
        found = [
            (session, pending) for session in self.list(project_root) for pending in session.pending_decisions.values()
        ]
        return sorted(found, key=lambda pair: pair[1].created_at)

    def find_pending(self, decision_id: str, project_root: Path | str) -> tuple[Session, PendingDecision]:
        for session in self.list(project_root):
            if decision_id in session.pending_decisions:
                return session, session.pending_decisions[decision_id]
        raise DecisionError(
            f"no pending decision {decision_id!r} for {_root(project_root)}",
            hint="`snodo authorize` without an id lists the pending decisions",
        )

    def list(self, project_root: Path | str | None = None) -> builtins.list[Session]:
        """Sessions, oldest first, optionally only those of one project. A corrupt file raises."""
        root = _root(project_root) if project_root is not None else None
        sessions = [load_record(path, Session) for path in sorted(self.directory.glob("*.json"))]
        return [s for s in sessions if root is None or s.project_root == root]


def project_state_path(project: Path) -> Path:
    return Path(project) / ".snodo" / "state.json"


def load_project_state(project: Path) -> ProjectState:
    """The project's state; an absent file is a fresh project, a corrupt one raises."""
    try:
        return load_record(project_state_path(project), ProjectState)
    except FileNotFoundError:
        return ProjectState()


def save_project_state(project: Path, state: ProjectState) -> None:
    """Overwrite the project state; use :func:`update_project_state` to change a field."""
    project_state_dir(project)
    save_record(project_state_path(project), state)


def update_project_state(project: Path, change: Callable[[ProjectState], ProjectState]) -> ProjectState:
    """Locked read-modify-write, so a mode change never drops a session another process
    recorded meanwhile (and vice versa)."""
    project_state_dir(project)
    with file_lock(project_state_path(project)):
        state = change(load_project_state(project))
        save_project_state(project, state)
    return state


def ensure_session(project: Path, mode: str, home: Path) -> tuple[Session, bool]:
    """The project's active session for ``mode``, started (and recorded) if there is none.

    Returns ``(session, created)`` so the caller can audit ``session_started``. Ids of
    sessions whose files are gone are dropped from the project state.
    """
    store = SessionStore(home)
    project_state_dir(project)
    path = project_state_path(project)
    with file_lock(path):
        state = load_project_state(project)
        live = tuple(sid for sid in state.active_sessions if store.exists(sid))
        for sid in live:
            session = store.load(sid)
            if session.mode == mode and session.status == ACTIVE and session.project_root == _root(project):
                return session, False
        session = store.create(project, mode)
        save_project_state(project, evolve(state, active_sessions=(*live, session.session_id)))
    return session, True
