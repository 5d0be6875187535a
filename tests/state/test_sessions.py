from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import time
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from attrs import evolve

from snodo.base.errors import DecisionError, StateError
from snodo.state.audit import AuditLog
from snodo.state.sessions import (
    PendingDecision,
    ProjectState,
    SessionStore,
    ensure_session,
    load_project_state,
    save_project_state,
)

MakePending = Callable[..., PendingDecision]


@pytest.fixture
def store(home: Path) -> SessionStore:
    return SessionStore(home)


def test_create_load_list(store: SessionStore, project: Path, tmp_path: Path) -> None:
    session = store.create(project, "dev")
    other = store.create(tmp_path, "dev")
    assert store.load(session.session_id) == session
    assert session.project_root == str(project.resolve()) and session.status == "active"
    assert (store.directory / f"{session.session_id}.json").exists()
    assert store.list(project) == [session]
    assert {s.session_id for s in store.list()} == {session.session_id, other.session_id}


def test_corrupt_session_is_reported_with_path_and_kept(store: SessionStore, project: Path) -> None:
    session = store.create(project, "dev")
    path = store.directory / f"{session.session_id}.json"
    path.write_text('{"session_id": ')
    with pytest.raises(StateError, match="is corrupt") as caught:
        store.load(session.session_id)
    assert str(path) in str(caught.value)
    with pytest.raises(StateError, match=str(path)):
        store.list(project)
    assert path.read_text() == '{"session_id": '


def test_session_with_wrong_field_names_it(store: SessionStore, project: Path) -> None:
    session = store.create(project, "dev")
    path = store.directory / f"{session.session_id}.json"
    data = json.loads(path.read_text())
    data["mode"] = ["dev"]
    path.write_text(json.dumps(data))
    with pytest.raises(StateError, match=r"mode"):
        store.load(session.session_id)


def test_unknown_or_unsafe_session_ids(store: SessionStore) -> None:
    with pytest.raises(StateError, match="no session"):
        store.load("20250101T000000-deadbeef")
    with pytest.raises(StateError, match="not a valid session id"):
        store.load("../../etc/passwd")


def test_pending_decisions_add_find_remove(store: SessionStore, project: Path, make_pending: MakePending) -> None:
    session = store.create(project, "dev")
    first, second = make_pending("dec-1"), make_pending("dec-2")
    store.add_pending(session.session_id, first)
    store.add_pending(session.session_id, second)
    assert store.load(session.session_id).pending_decisions == {"dec-1": first, "dec-2": second}
    found_session, found = store.find_pending("dec-2", project)
    assert found == second and found_session.session_id == session.session_id
    assert [p.decision_id for _, p in store.pending(project)] == ["dec-1", "dec-2"]
    assert store.remove_pending(session.session_id, "dec-1") == first
    with pytest.raises(DecisionError, match="no pending decision 'dec-1'"):
        store.find_pending("dec-1", project)
    with pytest.raises(DecisionError):
        store.remove_pending(session.session_id, "dec-1")
    assert list(store.load(session.session_id).pending_decisions) == ["dec-2"]


def test_pending_decision_is_found_only_in_its_project(
    store: SessionStore, project: Path, tmp_path: Path, make_pending: MakePending
) -> None:
    session = store.create(project, "dev")
    store.add_pending(session.session_id, make_pending("dec-1"))
    with pytest.raises(DecisionError):
        store.find_pending("dec-1", tmp_path)


def test_blocking_validators(make_pending: MakePending) -> None:
    assert make_pending(severities={"a": "pass", "b": "warn"}).blocking_validators() == ()
    assert make_pending(severities={"a": "blocker", "b": "warn"}).blocking_validators() == ("a",)
    assert make_pending(severities={"a": "error"}, error="timed out").blocking_validators() == ("a",)
    crashed = make_pending(severities={"a": "warn"})
    crashed = evolve(crashed, results=({**crashed.results[0], "error": "boom"},))
    assert crashed.blocking_validators() == ("a",)
    assert make_pending(severities={"a": "pass", "b": "warn"}).warned_validators() == ("b",)


@pytest.mark.slow
def test_concurrent_add_pending_loses_nothing(
    store: SessionStore, project: Path, spawn: Callable[..., subprocess.Popen[str]]
) -> None:
    session = store.create(project, "dev")
    workers = [spawn("add-pending", store.directory.parent, session.session_id, 25, f"w{n}") for n in range(6)]
    for worker in workers:
        _, err = worker.communicate(timeout=60)
        assert worker.returncode == 0, err
    pending = store.load(session.session_id).pending_decisions
    assert set(pending) == {f"w{n}-{i}" for n in range(6) for i in range(25)}


# ------------------------------------------------------------------ project state


def test_project_state_defaults_and_round_trip(project: Path) -> None:
    assert load_project_state(project) == ProjectState()
    save_project_state(project, ProjectState(current_mode="dev", active_sessions=("s1",)))
    assert load_project_state(project) == ProjectState(current_mode="dev", active_sessions=("s1",))
    assert json.loads((project / ".git" / "snodo" / "state.json").read_text())["active_sessions"] == ["s1"]


def test_corrupt_project_state_is_reported(project: Path, home: Path) -> None:
    path = project / ".git" / "snodo" / "state.json"
    path.write_text("[1, 2")
    with pytest.raises(StateError, match=str(path)):
        ensure_session(project, "dev", home)
    assert path.read_text() == "[1, 2"


def test_ensure_session_starts_once_per_mode(project: Path, home: Path, store: SessionStore) -> None:
    session, created = ensure_session(project, "dev", home)
    assert created
    assert ensure_session(project, "dev", home) == (session, False)
    review, created = ensure_session(project, "review", home)
    assert created and review.session_id != session.session_id
    assert load_project_state(project).active_sessions == (session.session_id, review.session_id)
    store.path(session.session_id).unlink()
    again, created = ensure_session(project, "dev", home)
    assert created
    assert load_project_state(project).active_sessions == (review.session_id, again.session_id)


@pytest.mark.slow
def test_concurrent_commands_start_one_session(
    project: Path, home: Path, spawn: Callable[..., subprocess.Popen[str]]
) -> None:
    workers = [spawn("ensure-session", home, project, "dev") for _ in range(5)]
    answers = sorted(w.communicate(timeout=60)[0].split() for w in workers)
    assert len({sid for sid, _ in answers}) == 1
    assert [created for _, created in answers].count("True") == 1
    assert load_project_state(project).active_sessions == (answers[0][0],)


def test_ending_a_session_keeps_the_other_fields_of_the_project_state(project: Path, home: Path) -> None:
    session, _ = ensure_session(project, "dev", home)
    state = load_project_state(project)
    save_project_state(project, evolve(state, current_mode="review"))
    assert load_project_state(project).active_sessions == (session.session_id,)
    SessionStore(home).end(session.session_id)
    assert load_project_state(project) == ProjectState(current_mode="review", active_sessions=())


# ------------------------------------------------------------------ fault injection


@pytest.mark.slow
def test_sigkill_mid_write_leaves_state_readable(
    project: Path, home: Path, store: SessionStore, spawn: Callable[..., subprocess.Popen[str]]
) -> None:
    """Kill a process hammering a session file and the audit log; both must stay intact."""
    session = store.create(project, "dev")
    log = AuditLog(project / ".git" / "snodo" / "audit.log")
    rng = random.Random(7)
    for _ in range(6):
        worker = spawn("write-forever", home, session.session_id, log.path)
        assert worker.stdout is not None and worker.stdout.readline() == "started\n"
        time.sleep(rng.uniform(0.05, 0.3))
        os.kill(worker.pid, signal.SIGKILL)
        worker.wait(timeout=10)
        assert worker.returncode == -signal.SIGKILL
        store.load(session.session_id)
        report = log.verify()
        assert report.ok and report.count > 0, report
        log.append("after_kill", mode="dev", data={})
    assert log.verify().ok
    assert [p for p in store.directory.glob("*.json")] == [store.path(session.session_id)]


# ------------------------------------------------------------ idle expiry and closing


def _idle_for(store: SessionStore, session_id: str, hours: float) -> None:
    """Fake an age: rewrite the recorded last activity (no sleeping)."""
    path = store.path(session_id)
    data = json.loads(path.read_text())
    stamp = datetime.now(UTC) - timedelta(hours=hours)
    data["last_active_at"] = data["started_at"] = stamp.isoformat(timespec="seconds")
    path.write_text(json.dumps(data))


def test_an_idle_session_reads_expired_and_the_next_command_starts_a_fresh_one(
    project: Path, home: Path, store: SessionStore
) -> None:
    session, _ = ensure_session(project, "dev", home)
    _idle_for(store, session.session_id, 23)
    assert [s.status for s in store.list(project)] == ["active"]
    assert ensure_session(project, "dev", home)[1] is False  # still within the day
    _idle_for(store, session.session_id, 25)
    listed = store.list(project)
    assert [s.status for s in listed] == ["expired"] and listed[0].ended_at
    fresh, created = ensure_session(project, "dev", home)
    assert created and fresh.session_id != session.session_id
    assert store.load(session.session_id).status == "expired"  # written down, not only shown
    assert load_project_state(project).active_sessions == (fresh.session_id,)


def test_the_idle_ttl_is_configurable(project: Path, store: SessionStore, monkeypatch: pytest.MonkeyPatch) -> None:
    session = store.create(project, "dev")
    _idle_for(store, session.session_id, 2)
    assert store.list(project)[0].status == "active"
    monkeypatch.setenv("SNODO_SESSION_IDLE_TTL", "3600")
    assert store.list(project)[0].status == "expired"
    monkeypatch.setenv("SNODO_SESSION_IDLE_TTL", "not a number")  # ignored: the documented default
    assert store.list(project)[0].status == "active"


def test_a_session_with_a_waiting_decision_does_not_expire(
    project: Path, store: SessionStore, make_pending: MakePending
) -> None:
    session = store.create(project, "dev")
    store.add_pending(session.session_id, make_pending("dec-wait"))
    _idle_for(store, session.session_id, 24 * 30)
    assert store.list(project)[0].status == "active"


def test_activity_keeps_a_session_alive(project: Path, home: Path, store: SessionStore) -> None:
    session, _ = ensure_session(project, "dev", home)
    _idle_for(store, session.session_id, 20)
    touched, created = ensure_session(project, "dev", home)
    assert not created and touched.session_id == session.session_id
    assert touched.last_active() is not None and datetime.now(UTC) - touched.last_active() < timedelta(minutes=1)


def test_a_touch_within_the_minute_writes_nothing(project: Path, home: Path, store: SessionStore) -> None:
    """Every governed call touches its session; only a touch that changes the record (the
    first in a minute) writes it: the others cost no durable write."""
    session, _ = ensure_session(project, "dev", home)
    path = store.path(session.session_id)
    before = os.stat(path)
    again, _ = ensure_session(project, "dev", home)
    after = os.stat(path)
    assert again == store.load(session.session_id)
    assert (after.st_ino, after.st_mtime_ns) == (before.st_ino, before.st_mtime_ns)
    _idle_for(store, session.session_id, 20)
    idle = os.stat(path)
    ensure_session(project, "dev", home)
    assert os.stat(path).st_ino != idle.st_ino  # a touch a minute later is written (atomically)


def test_end_closes_and_drops_from_the_project(project: Path, home: Path, store: SessionStore) -> None:
    session, _ = ensure_session(project, "dev", home)
    ended = store.end(session.session_id)
    assert ended.status == "closed" and ended.ended_at
    assert load_project_state(project).active_sessions == ()
    assert ensure_session(project, "dev", home)[1] is True
