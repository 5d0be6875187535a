"""``snodo audit export``: the log and the audit public key, for checking on another machine."""

from __future__ import annotations

from pathlib import Path

from attrs import frozen

from snodo.base.errors import AuditChainError, StateError
from snodo.state.atomic import atomic_create_bytes, file_lock
from snodo.state.audit import AuditLog, VerifyReport
from snodo.state.audit_key import audit_public_key
from snodo.state.keys import openssh_public


@frozen(kw_only=True)
class Export:
    log_file: Path
    key_file: Path
    report: VerifyReport


def export_log(log: AuditLog, dest: Path) -> Export:
    """Copy ``log`` (under its lock) and the audit public key into ``dest``, and verify the
    copy with that key alone; a broken log is not exported (the error says where it breaks)."""
    key = audit_public_key(log.home)
    if key is None:
        raise StateError(f"nothing to export: this home ({log.home}) has no audit key, so it signed no log")
    report = log.verify()
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
        with file_lock(log.path, shared=True):
            data = log.path.read_bytes() if log.path.exists() else b""
    except OSError as exc:
        raise StateError(f"cannot export to {dest}: {exc.strerror or exc}") from exc
    log_file, key_file = dest / "audit.log", dest / "audit-key.pub"
    for path, content in ((log_file, data), (key_file, openssh_public(key).encode("ascii") + b"\n")):
        if not atomic_create_bytes(path, content, mode=0o644):
            raise StateError(f"{path} already exists; export into an empty directory")
    copied = AuditLog(log_file, home=log.home).verify(key=key, anchored=False)
    if not copied.ok:
        raise StateError(f"the exported copy {log_file} does not verify: line {copied.line}: {copied.reason}")
    return Export(log_file=log_file, key_file=key_file, report=copied)
