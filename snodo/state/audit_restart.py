"""``snodo audit restart``: a new audit log after the old one was lost, without hiding the loss.

``git clean -fdx``, a fresh clone or a deleted ``audit.log`` leave the home holding a
checkpoint the log no longer reaches, and every append refuses: that cannot be told apart
from a deletion meant to hide something. A person's explicit act starts a new log whose
first signed line, ``audit_restarted``, records the lost head as the home knew it, what was
found wrong and the reason given; what is left of the old file is kept as
``audit.log.lost-<time>``. No MCP tool exposes it, and confined processes cannot reach the
audit key to sign a new log (docs/security.md).
"""

from __future__ import annotations

import hashlib
import os
from datetime import UTC, datetime
from typing import Any

from snodo.base.errors import StateError
from snodo.state.atomic import file_lock
from snodo.state.audit import AuditLog
from snodo.state.audit_chain import GENESIS, ChainBreak
from snodo.state.audit_checkpoint import newest, read_anchor
from snodo.state.audit_key import audit_public_key

EVENT = "audit_restarted"
MAX_REASON = 2000


def restart_log(log: AuditLog, reason: str) -> dict[str, Any]:
    """Start a new log recording the lost head and ``reason``; returns its first record.

    Refused without a reason, when the home recorded no checkpoint for this log (nothing
    was lost: the next event starts the log) and when the log is intact.
    """
    reason = (reason or "").strip()
    if not reason:
        raise StateError("`snodo audit restart` needs a reason", hint='say why: --reason "the checkout was re-cloned"')
    audit_public_key(log.home)  # the home must be readable before anything moves
    with file_lock(log.path):
        found = _fault(log)
        lost = newest(log.anchor_path) or {}
        kept = _keep_aside(log)
        record = {
            "ts": datetime.now(UTC).isoformat(timespec="microseconds"),
            "event": EVENT,
            "mode": None,
            "data": {
                "reason": reason[:MAX_REASON],
                "found": found,
                "lost_head": {k: lost.get(k) for k in ("seq", "hash", "size", "ts", "key", "signature", "log")},
                "previous_file": kept,
                "by": os.environ.get("USER") or os.environ.get("LOGNAME") or "",
            },
        }
        log._append_signed([record], 0, GENESIS)
    return record


def _fault(log: AuditLog) -> str:
    """What is wrong with the log the home recorded a checkpoint for; refused if nothing is."""
    try:
        anchor = read_anchor(log.anchor_path)
    except ChainBreak as broken:
        raise StateError(f"cannot restart {log.path}: {broken.reason}") from None
    if anchor is None:
        raise StateError(
            f"nothing to restart: {log.home} recorded no signed checkpoint for {log.path}",
            hint="a log the home never signed starts by itself with the next event",
        )
    try:
        scan = log._scan(anchor)
        problem = log._first_problem(scan, anchor, audit_public_key(log.home))
    except ChainBreak as broken:
        return broken.reason
    if problem is None:
        raise StateError(
            f"{log.path} is intact ({scan.events} events): there is nothing to restart",
            hint="`snodo audit verify` checks it",
        )
    return problem.reason


def _keep_aside(log: AuditLog) -> dict[str, Any] | None:
    """Move what is left of the old log (if anything) to ``audit.log.lost-<time>``."""
    try:
        data = log.path.read_bytes()
    except FileNotFoundError:
        return None
    except OSError as exc:
        raise StateError(f"cannot read {log.path}: {exc.strerror or exc}") from exc
    name = f"{log.path.name}.lost-{datetime.now(UTC):%Y%m%dT%H%M%S%f}"
    try:
        os.rename(log.path, log.path.with_name(name))
    except OSError as exc:
        raise StateError(f"cannot move {log.path} aside: {exc.strerror or exc}") from exc
    return {"kept_in": name, "bytes": len(data), "sha256": hashlib.sha256(data).hexdigest()}
