"""Single-use validation tokens (INV1): an HS256 JWT bound to one task and spec, plus a row in
``$SNODO_HOME/tokens.db`` that one ``UPDATE ... WHERE consumed_at IS NULL`` in a ``BEGIN
IMMEDIATE`` transaction consumes (for exactly one of concurrent consumers). Every database
failure raises: a token store that cannot answer never lets work through."""

from __future__ import annotations

import contextlib
import sqlite3
import threading
import time
import uuid
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path

from attrs import asdict, frozen
from cattrs.errors import BaseValidationError

from snodo.base.convert import CONVERTER
from snodo.base.errors import StateError, TokenError
from snodo.state import jws
from snodo.state.home import made
from snodo.state.keys import token_key

_BUSY_TIMEOUT_S = 10.0
_TTL_S = 600
_KEEP_EXPIRED_S = 24 * 3600  # kept a day for inspection, removed by an issue at most once a minute
_PURGE_EVERY_S = 60
_SCHEMA = """
CREATE TABLE IF NOT EXISTS tokens (
    jti         TEXT PRIMARY KEY,
    task_id     TEXT NOT NULL,
    spec_sha256 TEXT NOT NULL,
    mode        TEXT NOT NULL,
    issued_at   INTEGER NOT NULL,
    expires_at  INTEGER NOT NULL,
    consumed_at INTEGER,
    consumer    TEXT
);
CREATE INDEX IF NOT EXISTS tokens_by_expiry ON tokens (expires_at);
"""


@frozen(kw_only=True)
class TokenClaims:
    jti: str
    iat: int
    exp: int
    task_id: str
    spec_sha256: str
    mode: str
    validators: tuple[str, ...]


def _refuse(reason: str, detail: str = "", hint: str | None = None) -> TokenError:
    message = f"validation token refused: {reason}" + (f" ({detail})" if detail else "")
    return TokenError(message, reason=reason, hint=hint or "validate the task again for a new token")


class TokenService:
    """Validation tokens of one ``$SNODO_HOME``; ``clock`` is the time source (tests need not sleep)."""

    def __init__(self, home: Path, *, clock: Callable[[], float] = time.time) -> None:
        self.db_path = made(home) / "tokens.db"
        self._key = token_key(home)
        self._clock = clock
        self._local = threading.local()
        self._purged = -_PURGE_EVERY_S  # when this service last removed day-old rows
        with self._db() as conn:
            conn.execute("PRAGMA journal_mode=WAL")
            conn.executescript(_SCHEMA)

    @contextlib.contextmanager
    def _db(self, *, durable: bool = True) -> Iterator[sqlite3.Connection]:
        """This thread's autocommit connection (kept: closing the last one checkpoints the WAL).
        ``durable=False`` skips the fsync: right for issuing (a lost record only makes its token
        unknown), never for consuming (a lost claim would let a token be used twice)."""
        conn: sqlite3.Connection | None = getattr(self._local, "conn", None)
        try:
            # a database replaced under a live connection: others claim tokens in another file
            identity = _file_identity(self.db_path)
            if conn is not None and (identity is None or identity != self._local.identity):
                with contextlib.suppress(sqlite3.Error):
                    conn.close()
                conn = self._local.conn = None
            if conn is None:
                conn = sqlite3.connect(self.db_path, timeout=_BUSY_TIMEOUT_S, isolation_level=None)
                self._local.conn, self._local.identity = conn, _file_identity(self.db_path)
            conn.execute("PRAGMA synchronous=FULL" if durable else "PRAGMA synchronous=NORMAL")
        except sqlite3.Error as exc:
            raise StateError(f"cannot open token store {self.db_path}: {exc}") from exc
        try:
            yield conn
        except sqlite3.Error as exc:
            raise StateError(
                f"token store {self.db_path} failed: {exc}",
                hint="no token was issued or consumed; retry, or inspect the database file",
            ) from exc
        finally:
            if conn.in_transaction:
                with contextlib.suppress(sqlite3.Error):
                    conn.execute("ROLLBACK")

    def issued(
        self, *, task_id: str, spec_sha256: str, mode: str, validators: Sequence[str]
    ) -> tuple[str, TokenClaims]:
        """A token for this task and spec, recorded as unconsumed, and the claims it carries."""
        now = int(self._clock())
        claims = TokenClaims(
            jti=uuid.uuid4().hex,
            iat=now,
            exp=now + _TTL_S,
            task_id=task_id,
            spec_sha256=spec_sha256,
            mode=mode,
            validators=tuple(validators),
        )
        token = jws.sign(asdict(claims), self._key)
        purge = now >= self._purged + _PURGE_EVERY_S
        with self._db(durable=False) as conn:
            if purge:
                conn.execute("BEGIN IMMEDIATE")
                conn.execute("DELETE FROM tokens WHERE expires_at < ?", (now - _KEEP_EXPIRED_S,))
            conn.execute(
                "INSERT INTO tokens (jti, task_id, spec_sha256, mode, issued_at, expires_at) VALUES (?, ?, ?, ?, ?, ?)",
                (claims.jti, task_id, spec_sha256, mode, now, now + _TTL_S),
            )
            if purge:
                conn.execute("COMMIT")
                self._purged = now
        return token, claims

    def consume(self, token: str, *, task_id: str, spec_sha256: str, consumer: str) -> TokenClaims:
        """Check signature, shape, expiry and binding, then claim the token (of concurrent consumers, one)."""
        try:
            claims = CONVERTER.structure(jws.verify(token, self._key), TokenClaims)
        except jws.BadSignature as exc:
            raise _refuse("bad signature", str(exc)) from None
        except jws.MalformedToken as exc:
            raise _refuse("malformed", str(exc)) from None
        except (BaseValidationError, TypeError, ValueError):
            raise _refuse("malformed", "claims have the wrong shape") from None
        if int(self._clock()) >= claims.exp:
            raise _refuse("expired")
        if claims.task_id != task_id:
            raise _refuse("bound to another task", f"issued for {claims.task_id!r}, not {task_id!r}")
        if claims.spec_sha256 != spec_sha256:
            raise _refuse(
                "bound to another spec",
                "the spec changed since validation",
                hint="validate the current spec again for a new token",
            )
        with self._db() as conn:
            conn.execute("BEGIN IMMEDIATE")
            row = conn.execute("SELECT consumed_at FROM tokens WHERE jti = ?", (claims.jti,)).fetchone()
            if row is None:
                raise _refuse("unknown token", "not in this user's token store")
            claimed = conn.execute(
                "UPDATE tokens SET consumed_at = ?, consumer = ? WHERE jti = ? AND consumed_at IS NULL",
                (int(self._clock()), consumer, claims.jti),
            ).rowcount
            if claimed != 1:
                raise _refuse("already consumed")
            conn.execute("COMMIT")
        return claims


def _file_identity(path: Path) -> tuple[int, int] | None:
    try:
        stat = path.stat()
    except OSError:
        return None
    return stat.st_dev, stat.st_ino
