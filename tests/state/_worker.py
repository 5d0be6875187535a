"""A separate process for the state tests: ``python _worker.py COMMAND ARGS...``.

Runs the real state code in its own interpreter so locks, SQLite transactions and SIGKILL
behave as they do between snodo processes. It is a script (run by path, never imported by
the tests), so it works whatever pytest's import mode is.
"""

from __future__ import annotations

import fcntl
import hashlib
import os
import sys
from collections.abc import Callable
from pathlib import Path

from snodo.base.errors import TokenError
from snodo.state.audit import AuditLog
from snodo.state.keys import token_key
from snodo.state.sessions import PendingDecision, SessionStore, ensure_session
from snodo.state.tokens import TokenService


def pending(decision_id: str) -> PendingDecision:
    return PendingDecision(
        decision_id=decision_id,
        task_id="task",
        spec_sha256="0" * 64,
        mode="dev",
        phase="pre_execute",
        results=(
            {
                "validator_id": "v",
                "validator_type": "t",
                "severity": "warn",
                "justification": "j",
                "error": None,
            },
        ),
        policy={"name": "unanimous", "pass_count": 0, "warn_count": 1, "blocker_count": 0, "total": 1},
        created_at="2025-01-01T00:00:00+00:00",
        spec_text="spec",
    )


def audit_append(log: str, count: str, tag: str) -> None:
    audit = AuditLog(Path(log))
    for i in range(int(count)):
        audit.append("tool_call", mode="dev", data={"worker": tag, "i": i})


def add_pending(home: str, session_id: str, count: str, tag: str) -> None:
    store = SessionStore(Path(home))
    for i in range(int(count)):
        store.add_pending(session_id, pending(f"{tag}-{i}"))


def ensure(home: str, project: str, mode: str) -> None:
    session, created = ensure_session(Path(project), mode, Path(home))
    print(session.session_id, created, flush=True)


def write_forever(home: str, session_id: str, log: str) -> None:
    """Rewrite a session file and append to the audit log until killed; says ``started``
    once the first record is in the log (so a kill, however late the worker ran, comes
    after it)."""
    store, audit = SessionStore(Path(home)), AuditLog(Path(log))
    i = 0
    while True:
        store.add_pending(session_id, pending(f"d{i}"))
        audit.append("validate", mode="dev", data={"i": i, "pad": "x" * (i % 300)})
        if i == 0:
            print("started", flush=True)
        if i % 3:
            store.remove_pending(session_id, f"d{i}")
        i += 1


def token_key_hash(home: str) -> None:
    print(hashlib.sha256(token_key(Path(home))).hexdigest(), flush=True)


def consume_rounds(home: str, gate: str, name: str) -> None:
    """Per stdin line ``task spec token``: say ready, wait at the gate, consume, report.

    The gate is a barrier: the test holds an exclusive lock on it until every worker is
    ready, then releases it so all of them reach ``consume`` at once.
    """
    service = TokenService(Path(home))
    gate_fd = os.open(gate, os.O_RDWR)
    for line in sys.stdin:
        task, spec, token = line.split()
        print("ready", flush=True)
        fcntl.flock(gate_fd, fcntl.LOCK_SH)
        try:
            service.consume(token, task_id=task, spec_sha256=spec, consumer=name)
            outcome = "won"
        except TokenError as exc:
            outcome = f"lost:{exc.reason}"
        finally:
            fcntl.flock(gate_fd, fcntl.LOCK_UN)
        print(outcome, flush=True)


COMMANDS: dict[str, Callable[..., None]] = {
    "audit-append": audit_append,
    "add-pending": add_pending,
    "write-forever": write_forever,
    "ensure-session": ensure,
    "token-key-hash": token_key_hash,
    "consume-rounds": consume_rounds,
}

if __name__ == "__main__":
    COMMANDS[sys.argv[1]](*sys.argv[2:])
