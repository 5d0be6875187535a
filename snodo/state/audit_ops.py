"""A person's acts on a project's audit log, exposed by no MCP tool: ``snodo audit export``
and ``snodo audit restart``, a new log whose first signed line records the lost head (a lost
log cannot be told apart from one deleted to hide something; docs/architecture.md, "Evidence")."""

from __future__ import annotations

import hashlib
import os
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from attrs import frozen

from snodo.base.errors import AuditChainError, StateError
from snodo.state.atomic import atomic_create_bytes, file_lock, read_bytes
from snodo.state.audit import AuditLog, VerifyReport
from snodo.state.audit_chain import GENESIS, Anchor, ChainBreak, first_problem, read_anchor, scan_lines
from snodo.state.audit_key import audit_public_key
from snodo.state.keys import openssh_public


@frozen(kw_only=True)
class Export:
    log_file: Path
    key_file: Path
    report: VerifyReport


def export_log(log: AuditLog, dest: Path) -> Export:
    """Copy ``log`` as it verifies with the audit public key, read under the same lock, and
    that key into ``dest``; a broken log is not exported (the error says where it breaks)."""
    key = audit_public_key(log.home)
    if key is None:
        raise StateError(f"nothing to export: this home ({log.home}) has no audit key, so it signed no log")
    with file_lock(log.path, shared=True):
        report = log.verify(key=key)
        if not report.ok:
            error = AuditChainError(
                f"audit log {log.path} is broken at line {report.line}: {report.reason}; nothing was exported",
                line=report.line,
                reason=report.reason,
                hint="`snodo audit verify` shows the fault",
            )
            error.exit_code = 1
            raise error
        try:
            dest.mkdir(parents=True, exist_ok=True)
            data = log.path.read_bytes() if log.path.exists() else b""
        except OSError as exc:
            raise StateError(f"cannot export to {dest}: {exc.strerror or exc}") from exc
    log_file, key_file = dest / "audit.log", dest / "audit-key.pub"
    for path, content in ((log_file, data), (key_file, openssh_public(key).encode("ascii") + b"\n")):
        if not atomic_create_bytes(path, content, mode=0o644):
            raise StateError(f"{path} already exists; export into an empty directory")
    return Export(log_file=log_file, key_file=key_file, report=report)


EVENT = "audit_restarted"
MAX_REASON = 2000


def restart_log(log: AuditLog, reason: str) -> dict[str, Any]:
    """Start a new log recording the lost head and ``reason``; its first record. Refused without a
    reason, if the home recorded no checkpoint for this log (nothing was lost) or it is intact."""
    reason = (reason or "").strip()
    if not reason:
        raise StateError("`snodo audit restart` needs a reason", hint='say why: --reason "the checkout was re-cloned"')
    audit_public_key(log.home)  # the home must be readable before anything moves
    with file_lock(log.path):
        found, anchor = _fault(log)
        lost = anchor.record
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
        log._append_signed([(record, None)], 0, GENESIS, os.path.realpath(log.path), anchor)
    return record


def _fault(log: AuditLog) -> tuple[str, Anchor]:
    """What is wrong with the log, and the home's record of it; refused if nothing is."""
    try:
        anchor = read_anchor(log.anchor_path)
    except ChainBreak as broken:
        raise StateError(f"cannot restart {log.path}: {broken.reason}") from None
    if anchor is None:
        raise StateError(
            f"nothing to restart: {log.home} recorded no signed checkpoint for {log.path}",
            hint="a log the home never signed starts by itself with the next event",
        )
    scan = scan_lines(log.lines(), anchor)
    problem = first_problem(scan, anchor, audit_public_key(log.home), home=log.home)
    if problem is None:
        raise StateError(
            f"{log.path} is intact ({scan.events} events): there is nothing to restart",
            hint="`snodo audit verify` checks it",
        )
    return problem.reason, anchor


def _keep_aside(log: AuditLog) -> dict[str, Any] | None:
    """Move what is left of the old log (if anything) to ``audit.log.lost-<time>``."""
    try:
        data = read_bytes(log.path)
    except FileNotFoundError:
        return None
    name = f"{log.path.name}.lost-{datetime.now(UTC):%Y%m%dT%H%M%S%f}"
    try:
        os.rename(log.path, log.path.with_name(name))
    except OSError as exc:
        raise StateError(f"cannot move {log.path} aside: {exc.strerror or exc}") from exc
    return {"kept_in": name, "bytes": len(data), "sha256": hashlib.sha256(data).hexdigest()}
