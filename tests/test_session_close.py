"""`snodo session close` and what `session list` shows afterwards."""

from __future__ import annotations

import json
from pathlib import Path

from snodo.state.sessions import PendingDecision, SessionStore, ensure_session


def pending(decision_id: str) -> PendingDecision:
    return PendingDecision(
        decision_id=decision_id,
        task_id="task-1",
        spec_sha256="a" * 64,
        mode="producer",
        phase="pre_execute",
        results=({"validator_id": "review", "validator_type": "llm", "severity": "warn", "justification": "w"},),
        policy={"name": "unanimous", "pass_count": 0, "warn_count": 1, "blocker_count": 0, "total": 1},
        created_at="2026-01-01T00:00:00+00:00",
        spec_text="x",
    )


def test_close_refuses_to_lose_a_waiting_decision_unless_told(git_repo: Path, snodo_home: Path, snodo_cli) -> None:  # type: ignore[no-untyped-def]
    assert snodo_cli("init", cwd=git_repo).returncode == 0
    store = SessionStore(snodo_home)
    quiet, _ = ensure_session(git_repo, "producer", snodo_home)
    waiting, _ = ensure_session(git_repo, "reviewer", snodo_home)
    store.add_pending(waiting.session_id, pending("dec-abc"))

    refused = snodo_cli("session", "close", cwd=git_repo)
    assert refused.returncode != 0 and "dec-abc" in refused.stderr and "--drop-pending" in refused.stderr
    assert [s["status"] for s in snodo_cli("session", "list", "--json", cwd=git_repo).json()["sessions"]] == [
        "active",
        "active",
    ]

    one = snodo_cli("session", "close", quiet.session_id, "--json", cwd=git_repo)
    assert one.returncode == 0, one
    assert one.json() == {"closed": [{"session_id": quiet.session_id, "mode": "producer", "dropped_decisions": []}]}
    again = snodo_cli("session", "close", quiet.session_id, cwd=git_repo)
    assert again.returncode != 0 and "already closed" in again.stderr

    dropped = snodo_cli("session", "close", "--drop-pending", cwd=git_repo)
    assert dropped.returncode == 0, dropped
    assert f"closed {waiting.session_id}" in dropped.stdout and "dec-abc" in dropped.stdout
    listed = {s["session_id"]: s for s in snodo_cli("session", "list", "--json", cwd=git_repo).json()["sessions"]}
    assert {s["status"] for s in listed.values()} == {"closed"}
    assert listed[waiting.session_id]["pending_decisions"] == [] and listed[waiting.session_id]["ended_at"]
    audit = [json.loads(line) for line in (git_repo / ".git" / "snodo" / "audit.log").read_text().splitlines()]
    closes = [e["data"] for e in audit if e["event"] == "session_closed"]
    assert closes == [
        {"session_id": quiet.session_id, "dropped_decisions": []},
        {"session_id": waiting.session_id, "dropped_decisions": ["dec-abc"]},
    ]
    assert snodo_cli("audit", "verify", cwd=git_repo).returncode == 0
    nothing = snodo_cli("session", "close", cwd=git_repo)
    assert nothing.returncode == 0 and "no active session" in nothing.stdout
