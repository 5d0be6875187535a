"""Sessions (``$SNODO_HOME/sessions/<id>.json``), where an escalation waits for a person, and
project state (runtime ``state.json``), each changed under a lock and replaced atomically."""

from __future__ import annotations

import builtins
import os
import re
import secrets
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from attrs import Factory, evolve, frozen

from snodo.base.errors import DecisionError, EnvironmentProblem, StateError
from snodo.git.runner import run_git
from snodo.rules.authorisation import authorisation_refusals
from snodo.state.atomic import file_lock, load_record, save_record
from snodo.state.home import made
from snodo.state.runtime import runtime_dir

_SESSION_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_-]{0,63}$")
ACTIVE = "active"
CLOSED = "closed"
EXPIRED = "expired"

_TOUCH_EVERY = timedelta(seconds=60)  # so that busy sessions do not rewrite their file


def idle_ttl() -> timedelta:
    """``SNODO_SESSION_IDLE_TTL`` (seconds) if positive, else 24 hours."""
    raw = os.environ.get("SNODO_SESSION_IDLE_TTL", "").strip()
    if raw.isdigit() and int(raw) > 0:
        return timedelta(seconds=int(raw))
    return timedelta(hours=24)


def _now() -> datetime:
    return datetime.now(UTC)


def _when(stamp: str | None) -> datetime | None:
    if not stamp:
        return None
    try:
        value = datetime.fromisoformat(stamp)
    except ValueError:
        return None
    return value if value.tzinfo else value.replace(tzinfo=UTC)


@frozen(kw_only=True)
class PendingDecision:
    """An escalation awaiting a person; ``results`` and ``policy`` keep ``validate_task``'s
    payload shape (SPEC §3), so ``snodo authorize`` shows exactly what was decided on."""

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
        """What forbids authorising this decision (INV3)."""
        return authorisation_refusals(self.results, self.policy)

    def warned_validators(self) -> tuple[str, ...]:
        """Validators whose ``warn`` a human is asked to adjudicate."""
        return tuple(
            str(r.get("validator_id")) for r in self.results if r.get("severity") == "warn" or r.get("escalate") is True
        )


@frozen(kw_only=True)
class Session:
    session_id: str
    project_root: str
    mode: str
    started_at: str
    status: str
    pending_decisions: dict[str, PendingDecision] = Factory(dict)
    last_active_at: str | None = None
    ended_at: str | None = None
    base_head: str | None = None

    def last_active(self) -> datetime | None:
        return _when(self.last_active_at) or _when(self.started_at)

    def current(self, now: datetime | None = None) -> Session:
        """Active, idle past :func:`idle_ttl`, no decision waiting: it reads ``expired``."""
        last = self.last_active()
        if self.status != ACTIVE or self.pending_decisions or last is None or (now or _now()) - last <= idle_ttl():
            return self
        return evolve(self, status=EXPIRED, ended_at=(last + idle_ttl()).isoformat(timespec="seconds"))


@frozen(kw_only=True)
class ProjectState:
    current_mode: str | None = None
    active_sessions: tuple[str, ...] = ()


def _root(project_root: Path | str) -> str:
    return str(Path(project_root).resolve())


class SessionStore:
    def __init__(self, home: Path) -> None:
        self.directory = made(home / "sessions")

    def path(self, session_id: str) -> Path:
        if not _SESSION_ID.match(session_id):
            raise StateError(f"{session_id!r} is not a valid session id")
        return self.directory / f"{session_id}.json"

    def create(self, project_root: Path | str, mode: str, *, base_head: str | None = None) -> Session:
        started = datetime.now(UTC)
        session = Session(
            session_id=f"{started:%Y%m%dT%H%M%S}-{secrets.token_hex(4)}",
            project_root=_root(project_root),
            mode=mode,
            started_at=started.isoformat(timespec="seconds"),
            status=ACTIVE,
            last_active_at=started.isoformat(timespec="seconds"),
            base_head=base_head or _head(project_root),
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

    def _update(self, session_id: str, change: Callable[[Session], Session]) -> Session:
        path = self.path(session_id)
        with file_lock(path):
            before = self.load(session_id)
            session = change(before)
            if session != before:
                save_record(path, session)
        return session

    def touch(self, session_id: str) -> Session:
        def change(session: Session) -> Session:
            last = session.last_active()
            if last is not None and _now() - last < _TOUCH_EVERY:
                return session
            return evolve(session, last_active_at=_now().isoformat(timespec="seconds"))

        return self._update(session_id, change)

    def end(self, session_id: str) -> Session:
        def close(s: Session) -> Session:
            return s if s.status != ACTIVE else evolve(s, status=CLOSED, ended_at=_now().isoformat(timespec="seconds"))

        session = self._update(session_id, close)
        project = Path(session.project_root)
        if project_state_path(project).exists():
            with file_lock(project_state_path(project)):
                state = load_project_state(project)
                active = tuple(sid for sid in state.active_sessions if sid != session_id)
                save_project_state(project, evolve(state, active_sessions=active))
        return session

    def add_pending(self, session_id: str, pending: PendingDecision) -> Session:
        """Must complete before the escalation is reported."""
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
        """Oldest first."""
        found = ((s, p) for s in self.list(project_root) for p in s.pending_decisions.values())
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
        """Sessions as they stand now, oldest first."""
        root = _root(project_root) if project_root is not None else None
        now = _now()
        sessions = [load_record(path, Session).current(now) for path in sorted(self.directory.glob("*.json"))]
        return [s for s in sessions if root is None or s.project_root == root]


def project_state_path(project: Path) -> Path:
    return runtime_dir(Path(project)) / "state.json"


def load_project_state(project: Path) -> ProjectState:
    try:
        return load_record(project_state_path(project), ProjectState)
    except FileNotFoundError:
        return ProjectState()


def save_project_state(project: Path, state: ProjectState) -> None:
    save_record(project_state_path(project), state)


def _head(project_root: Path | str) -> str | None:
    try:
        found = run_git(Path(project_root), "rev-parse", "--verify", "--quiet", "HEAD")
    except EnvironmentProblem:
        return None
    return (found.stdout.strip() or None) if found.ok else None


def ensure_session(project: Path, mode: str, home: Path, *, base_head: str | None = None) -> tuple[Session, bool]:
    """``(session, created)``: the project's active session for ``mode``, started if there
    is none. Sessions gone, closed or expired leave the project state."""
    store = SessionStore(home)
    path = project_state_path(project)
    with file_lock(path):
        state = load_project_state(project)
        live: builtins.list[Session] = []
        for sid in state.active_sessions:
            if not store.path(sid).exists():
                continue
            stored = store.load(sid)
            if stored.current() is not stored:
                store._update(sid, lambda s: s.current())
            elif stored.status == ACTIVE:
                live.append(stored)
        for stored in live:
            if stored.mode == mode and stored.project_root == _root(project):
                return store.touch(stored.session_id), False
        session = store.create(project, mode, base_head=base_head)
        active = (*(s.session_id for s in live), session.session_id)
        save_project_state(project, evolve(state, active_sessions=active))
    return session, True
