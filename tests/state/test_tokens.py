from __future__ import annotations

import base64
import fcntl
import json
import os
import sqlite3
import subprocess
import time
from collections.abc import Callable
from contextlib import AbstractContextManager, closing
from pathlib import Path

import jwt
import pytest

from snodo.base.errors import StateError, TokenError
from snodo.state.tokens import TokenService

SPEC = "b" * 64


@pytest.fixture
def service(home: Path) -> TokenService:
    return TokenService(home)


def issue(service: TokenService, task_id: str = "task-1") -> str:
    return service.issued(task_id=task_id, spec_sha256=SPEC, mode="dev", validators=["lint", "review"])[0]


def refused(reason: str) -> AbstractContextManager[pytest.ExceptionInfo[TokenError]]:
    return pytest.raises(TokenError, match=f"refused: {reason}")


def test_issue_consume(service: TokenService) -> None:
    token, claims = service.issued(task_id="task-1", spec_sha256=SPEC, mode="dev", validators=["lint", "review"])
    assert claims.validators == ("lint", "review") and claims.mode == "dev"
    assert claims.exp - claims.iat == 600 and len(claims.jti) == 32
    assert service.consume(token, task_id="task-1", spec_sha256=SPEC, consumer="engine") == claims
    with closing(sqlite3.connect(service.db_path)) as conn:
        row = conn.execute("SELECT task_id, consumer, consumed_at FROM tokens WHERE jti=?", (claims.jti,)).fetchone()
        assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    assert row[:2] == ("task-1", "engine") and row[2] is not None


def test_issued_claims_are_the_tokens_and_expired_rows_go_by_index(home: Path, service: TokenService) -> None:
    """``issued`` hands back the claims the token verifies to; day-old rows are purged by
    an issue, at most once a minute per service, through an index (a long-lived home holds
    every token of its day), and an older database without the index gets it when opened."""
    token, claims = service.issued(task_id="task-1", spec_sha256=SPEC, mode="dev", validators=["lint"])
    assert service.consume(token, task_id="task-1", spec_sha256=SPEC, consumer="a") == claims
    old = TokenService(home, clock=lambda: time.time() - 3 * 86400)
    stale = issue(old, "old-task")
    issue(service, "kept")  # within a minute of this service's last purge: none now
    with closing(sqlite3.connect(service.db_path)) as conn:
        assert conn.execute("SELECT count(*) FROM tokens WHERE task_id = 'old-task'").fetchone()[0] == 1
    issue(TokenService(home), "new-task")  # a service's first issue removes what expired over a day ago
    with closing(sqlite3.connect(service.db_path)) as conn:
        plan = " ".join(str(r) for r in conn.execute("EXPLAIN QUERY PLAN DELETE FROM tokens WHERE expires_at < 1"))
        assert "tokens_by_expiry" in plan, plan
        assert conn.execute("SELECT count(*) FROM tokens WHERE task_id = 'old-task'").fetchone()[0] == 0
        conn.execute("DROP INDEX tokens_by_expiry")
        conn.commit()
    with refused("expired"):
        service.consume(stale, task_id="old-task", spec_sha256=SPEC, consumer="a")
    TokenService(home)
    with closing(sqlite3.connect(service.db_path)) as conn:
        names = [r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type = 'index'")]
    assert "tokens_by_expiry" in names


def test_reused_token_is_refused(service: TokenService) -> None:
    token = issue(service)
    service.consume(token, task_id="task-1", spec_sha256=SPEC, consumer="a")
    with refused("already consumed") as caught:
        service.consume(token, task_id="task-1", spec_sha256=SPEC, consumer="b")
    assert caught.value.reason == "already consumed"


def test_expired_token_is_refused(home: Path, service: TokenService) -> None:
    past = TokenService(home, clock=lambda: time.time() - 3600)
    token = issue(past)
    with refused("expired"):
        service.consume(token, task_id="task-1", spec_sha256=SPEC, consumer="a")


def test_binding_to_task_and_spec(service: TokenService) -> None:
    token = issue(service)
    with refused("bound to another task"):
        service.consume(token, task_id="task-2", spec_sha256=SPEC, consumer="a")
    with refused("bound to another spec"):
        service.consume(token, task_id="task-1", spec_sha256="c" * 64, consumer="a")
    service.consume(token, task_id="task-1", spec_sha256=SPEC, consumer="a")


def _b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def test_tampered_tokens_are_refused(service: TokenService) -> None:
    token = issue(service)
    header, payload, signature = token.split(".")
    claims = json.loads(base64.urlsafe_b64decode(payload + "=="))
    claims["task_id"] = "task-2"
    forged_claims = f"{header}.{_b64(json.dumps(claims).encode())}.{signature}"
    flipped = signature[:-2] + ("A" if signature[-2] != "A" else "B") + signature[-1]
    other_key = jwt.encode(claims | {"task_id": "task-1"}, "k" * 32, algorithm="HS256")
    unsigned = f"{_b64(json.dumps({'alg': 'none', 'typ': 'JWT'}).encode())}.{payload}."
    for bad in (forged_claims, f"{header}.{payload}.{flipped}", other_key, unsigned):
        with refused("bad signature"):
            service.consume(bad, task_id="task-1", spec_sha256=SPEC, consumer="a")
    with refused("malformed"):
        service.consume("not-a-token", task_id="task-1", spec_sha256=SPEC, consumer="a")
    service.consume(token, task_id="task-1", spec_sha256=SPEC, consumer="a")


def test_signed_claims_of_the_wrong_shape_are_refused(service: TokenService, home: Path) -> None:
    """Even under a valid signature, claims are read strictly: no coercion, nothing missing."""
    token = issue(service)
    claims = json.loads(base64.urlsafe_b64decode(token.split(".")[1] + "=="))
    key = (home / "keys" / "token.key").read_bytes()
    for bad in (
        {"iat": str(claims["iat"])},
        {"exp": True},
        {"validators": "lint"},
        {"validators": [1]},
        {"mode": None},
    ):
        forged = jwt.encode(claims | bad, key, algorithm="HS256")
        with refused("malformed"):
            service.consume(forged, task_id="task-1", spec_sha256=SPEC, consumer="a")
    missing = jwt.encode({k: v for k, v in claims.items() if k != "jti"}, key, algorithm="HS256")
    with refused("malformed"):
        service.consume(missing, task_id="task-1", spec_sha256=SPEC, consumer="a")
    service.consume(token, task_id="task-1", spec_sha256=SPEC, consumer="a")


def test_token_signed_with_the_key_but_never_issued_is_unknown(home: Path, service: TokenService) -> None:
    key = (home / "keys" / "token.key").read_bytes()
    now = int(time.time())
    claims = {
        "jti": "f" * 32,
        "iat": now,
        "exp": now + 60,
        "task_id": "task-1",
        "spec_sha256": SPEC,
        "mode": "dev",
        "validators": [],
    }
    with refused("unknown token"):
        service.consume(jwt.encode(claims, key, algorithm="HS256"), task_id="task-1", spec_sha256=SPEC, consumer="a")


def test_broken_token_store_fails_closed(home: Path, service: TokenService) -> None:
    token = issue(service)
    for suffix in ("", "-wal", "-shm"):
        Path(f"{service.db_path}{suffix}").unlink(missing_ok=True)
    service.db_path.write_bytes(b"this is not a database" * 100)
    with pytest.raises(StateError, match=r"tokens\.db"):
        service.consume(token, task_id="task-1", spec_sha256=SPEC, consumer="a")
    with pytest.raises(StateError, match=r"tokens\.db"):
        TokenService(home)


@pytest.mark.slow
def test_eight_processes_race_for_one_token(
    home: Path, tmp_path: Path, service: TokenService, spawn: Callable[..., subprocess.Popen[str]]
) -> None:
    """100 rounds: each round every worker waits at a gate, then all consume the same token."""
    gate = tmp_path / "gate"
    gate.touch()
    gate_fd = os.open(gate, os.O_RDWR)
    fcntl.flock(gate_fd, fcntl.LOCK_EX)
    workers = [spawn("consume-rounds", home, gate, f"w{n}", stdin=subprocess.PIPE) for n in range(8)]
    winners: list[str] = []
    try:
        for _ in range(100):
            token = issue(service)
            for worker in workers:
                assert worker.stdin is not None
                worker.stdin.write(f"task-1 {SPEC} {token}\n")
                worker.stdin.flush()
            assert all(w.stdout is not None and w.stdout.readline() == "ready\n" for w in workers)
            fcntl.flock(gate_fd, fcntl.LOCK_UN)
            outcomes = [w.stdout.readline().strip() for w in workers if w.stdout is not None]
            fcntl.flock(gate_fd, fcntl.LOCK_EX)
            assert outcomes.count("won") == 1, outcomes
            assert set(outcomes) == {"won", "lost:already consumed"}
            winners.append(f"w{outcomes.index('won')}")
    finally:
        os.close(gate_fd)
    for worker in workers:
        _, err = worker.communicate(timeout=30)  # closes stdin: the worker's loop ends
        assert worker.returncode == 0, err
    with closing(sqlite3.connect(service.db_path)) as conn:
        consumers = [row[0] for row in conn.execute("SELECT consumer FROM tokens ORDER BY issued_at, rowid")]
    assert sorted(consumers) == sorted(winners)
