"""The project's signed, hash-chained audit log, ``<project>/.snodo/audit.log``.

Each line is one JSON record ``{seq, ts, event, mode, data, prev, hash}``; ``hash`` is the
SHA-256 of the canonical JSON of the other six fields and ``prev`` is the previous line's
hash (64 zeros for line 1). Editing, removing or reordering a line breaks the chain.

A chain alone can be recomputed by anyone who can write the file, so every append ends
with a signed **checkpoint** line (``event: "checkpoint"``): an Ed25519 signature, made
with the user's audit key (:mod:`snodo.state.audit_key`), over the checkpoint's own seq and time
and the hash of the line before it. Like a signed tree head, one valid signature covers
every line before it through the chain, so a log is accepted only up to a checkpoint whose
signature verifies: a line after the last checkpoint is unsigned and never accepted.

The checkpoint of every append is also recorded in the user's home
(``$SNODO_HOME/audit/<key>.json``, out of reach of confined processes). A log shorter than
that checkpoint, or whose line there differs from it, was truncated, deleted or rolled
back to an older copy, even though every signature in it still verifies.

All the events of one governed call go in one append (:meth:`AuditLog.batch`): one write,
one signature, one fsync. A crash can leave part of one append after the last checkpoint;
the next writer moves those unsigned lines to ``audit.log.unsigned-<time>``, truncates the
log back to its last checkpoint and records ``audit_recovered``, so nothing unsigned is
ever accepted and nothing is thrown away. Any other fault stops every append.

Appends hold an exclusive lock. A process checks the whole log on its first append to it
(and whenever its size is not what the home's checkpoint says); later appends only compare
the last line with that checkpoint, so appending stays cheap on a long log.
"""

from __future__ import annotations

import base64
import binascii
import contextlib
import hashlib
import json
import os
import tempfile
import threading
from collections import deque
from collections.abc import Iterator, Mapping
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, BinaryIO

from attrs import frozen
from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey

from snodo.errors import AuditChainError, StateError
from snodo.state.atomic import atomic_create_bytes, canonical_json, file_lock, read_json
from snodo.state.audit_key import audit_public_key, audit_signing_key
from snodo.state.keys import openssh_public, public_key_fingerprint

GENESIS = "0" * 64
CHECKPOINT = "checkpoint"
_HASHED_FIELDS = ("seq", "ts", "event", "mode", "data", "prev")
_ALL_FIELDS = frozenset((*_HASHED_FIELDS, "hash"))
# Prefixed to the signed bytes so a checkpoint signature can never pass for a signature over
# any other snodo document.
_CHECKPOINT_CONTEXT = b"snodo audit checkpoint v1\n"

LARGE_STRING_CHARS = 4096
"""A string in an event longer than this is recorded as digest, length and excerpt."""
EXCERPT_CHARS = 256


def record_hash(record: Mapping[str, Any]) -> str:
    return hashlib.sha256(canonical_json({k: record[k] for k in _HASHED_FIELDS})).hexdigest()


def checkpoint_payload(seq: int, ts: str, prev: str, key: str) -> bytes:
    """What a checkpoint's signature covers: its place, its time, the chain head, the key."""
    return _CHECKPOINT_CONTEXT + canonical_json({"seq": seq, "ts": ts, "prev": prev, "key": key})


def bounded(value: Any) -> Any:
    """``value`` with every over-long string replaced by its digest, length and an excerpt.

    An agent's 10 MB argument must not become 10 MB of audit log; the digest still proves
    what was sent.
    """
    if isinstance(value, str):
        if len(value) <= LARGE_STRING_CHARS:
            return value
        return {
            "excerpt": value[:EXCERPT_CHARS],
            "length": len(value),
            "sha256": hashlib.sha256(value.encode("utf-8", "surrogatepass")).hexdigest(),
            "truncated": True,
        }
    if isinstance(value, dict):
        return {k: bounded(v) for k, v in value.items()}
    if isinstance(value, list):
        return [bounded(v) for v in value]
    return value


@frozen(kw_only=True)
class VerifyReport:
    """Outcome of checking a log: ``line`` (1-based) and ``reason`` name the first fault.

    ``count`` is the number of events (checkpoint lines excluded) before the fault.
    """

    ok: bool
    count: int
    line: int | None = None
    reason: str = ""
    checkpoints: int = 0
    key: str = ""


@frozen(kw_only=True)
class _Anchor:
    """The last checkpoint as recorded in the home: its seq, hash and the log size up to it."""

    seq: int
    hash: str
    size: int


class _Broken(Exception):
    def __init__(self, line: int | None, reason: str) -> None:
        super().__init__(reason)
        self.line = line
        self.reason = reason


@frozen(kw_only=True)
class _Scan:
    """What one pass over the log found."""

    lines: int  # complete, chained lines before any fault
    events: int  # events among them
    checkpoint: dict[str, Any] | None  # the last checkpoint line
    checkpoint_line: int
    checkpoints: int
    signed_size: int  # bytes up to and including the last checkpoint
    fault: _Broken | None
    fault_is_torn_end: bool  # the fault is an incomplete final line (a write cut off)
    anchor_hash: str | None  # hash of the line the home's checkpoint names, if reached


# Logs (by device and inode) whose whole chain this process has checked. Process-wide rather
# than per AuditLog, so code that builds a fresh AuditLog for every event does not rescan
# the whole log each time. Only touched under the log's exclusive lock.
_CHECKED: set[tuple[int, int]] = set()


def _parse_line(raw: bytes, lineno: int) -> dict[str, Any]:
    if not raw.endswith(b"\n"):
        raise _Broken(lineno, "incomplete last line (a write was cut off)")
    try:
        record = json.loads(raw)
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise _Broken(lineno, f"not valid JSON ({exc})") from exc
    if not isinstance(record, dict) or record.keys() != _ALL_FIELDS:
        found = sorted(record) if isinstance(record, dict) else type(record).__name__
        raise _Broken(lineno, f"not an audit record (fields: {found})")
    return record


def _check_record(record: dict[str, Any], lineno: int, prev: str) -> None:
    expected_seq = lineno - 1
    if type(record["seq"]) is not int or record["seq"] != expected_seq:
        raise _Broken(lineno, f"seq is {record['seq']!r}, expected {expected_seq}")
    if record["prev"] != prev:
        raise _Broken(lineno, "prev does not match the hash of the line before")
    try:
        actual = record_hash(record)
    except ValueError as exc:
        raise _Broken(lineno, f"record cannot be hashed ({exc})") from exc
    if record["hash"] != actual:
        raise _Broken(lineno, "hash does not match the record's content")
    if record["event"] == CHECKPOINT:
        data = record["data"]
        if (
            record["mode"] is not None
            or not isinstance(data, dict)
            or data.keys() != {"key", "signature"}
            or not all(isinstance(v, str) for v in data.values())
        ):
            raise _Broken(lineno, "malformed checkpoint (it must hold only a key and a signature)")


def check_signature(checkpoint: Mapping[str, Any], key: Ed25519PublicKey) -> str:
    """Why ``checkpoint``'s signature does not verify with ``key``, or "" if it does."""
    fingerprint = public_key_fingerprint(key)
    data = checkpoint["data"]
    if data["key"] != fingerprint:
        return f"checkpoint signed by key {data['key']}, not by the trusted audit key {fingerprint}"
    try:
        signature = base64.b64decode(data["signature"], validate=True)
        key.verify(signature, checkpoint_payload(checkpoint["seq"], checkpoint["ts"], checkpoint["prev"], data["key"]))
    except (InvalidSignature, binascii.Error, ValueError):
        return "checkpoint signature does not verify (the log was rewritten after it was signed)"
    return ""


class AuditLog:
    """Append-only, signed, hash-chained audit log shared by every process of a project.

    ``home`` is the ``$SNODO_HOME`` holding the audit key and the checkpoints; by default
    the current one, looked up on first use.
    """

    def __init__(self, path: Path, home: Path | None = None) -> None:
        self.path = Path(path)
        self._home = home
        self._local = threading.local()

    @property
    def home(self) -> Path:
        if self._home is None:
            from snodo.state.home import snodo_home

            self._home = snodo_home()
        return self._home

    @property
    def anchor_path(self) -> Path:
        """Where the home keeps this log's last checkpoint (keyed by the log's real path)."""
        key = hashlib.sha256(os.path.realpath(self.path).encode("utf-8", "surrogateescape")).hexdigest()[:16]
        return self.home / "audit" / f"{key}.json"

    # ----------------------------------------------------------------- reading

    def verify(self, *, key: Ed25519PublicKey | None = None, anchored: bool = True) -> VerifyReport:
        """Check every line, the last checkpoint's signature and the home's checkpoint.

        ``key`` is the trusted audit public key (default: this home's); ``anchored=False``
        skips the home's checkpoint, for a log checked on another machine. A log that has
        checkpoints but no key to check them against raises :class:`StateError`.
        """
        with file_lock(self.path, shared=True):
            anchor = self._read_anchor_or_broken() if anchored else None
            if isinstance(anchor, _Broken):
                return VerifyReport(ok=False, count=0, line=anchor.line, reason=anchor.reason)
            scan = self._scan(anchor)
            trusted = key
            if trusted is None and scan.checkpoint is not None:
                trusted = audit_public_key(self.home)
                if trusted is None:
                    raise StateError(
                        f"cannot verify {self.path}: this home ({self.home}) has no audit key",
                        hint="verify the log with the key that signed it: `snodo audit verify --key PUBKEY FILE`",
                    )
        problem = self._first_problem(scan, anchor, trusted)
        fingerprint = public_key_fingerprint(trusted) if trusted else ""
        if problem is None:
            return VerifyReport(ok=True, count=scan.events, checkpoints=scan.checkpoints, key=fingerprint)
        line = problem.line or 1
        return VerifyReport(
            ok=False,
            count=_events_before(self, line),
            line=line,
            reason=problem.reason,
            checkpoints=scan.checkpoints,
            key=fingerprint,
        )

    def records(
        self, event: str | None = None, last: int | None = None, *, checkpoints: bool = False
    ) -> list[dict[str, Any]]:
        """Events in order, optionally only one ``event`` and only the ``last`` N of them.

        Checkpoint lines are left out unless ``checkpoints`` (or ``event="checkpoint"``).
        """
        found: deque[dict[str, Any]] = deque(maxlen=last)
        with file_lock(self.path, shared=True):
            for lineno, raw in enumerate(self._lines(), start=1):
                try:
                    record = _parse_line(raw, lineno)
                except _Broken as broken:
                    raise self._error(broken) from None
                if record["event"] == CHECKPOINT and not checkpoints and event != CHECKPOINT:
                    continue
                if event is None or record["event"] == event:
                    found.append(record)
        return list(found)

    # ----------------------------------------------------------------- appending

    def append(self, event: str, *, mode: str | None, data: Mapping[str, Any]) -> dict[str, Any]:
        """Append one event and return its record; refuse if the log is broken.

        Inside :meth:`batch` the event is buffered and written (and the returned record
        completed with its seq and hash) when the outermost batch ends.
        """
        record = self._draft(event, mode, data)
        buffer: list[dict[str, Any]] | None = getattr(self._local, "buffer", None)
        if buffer is not None:
            buffer.append(record)
        else:
            self._flush([record])
        return record

    @contextlib.contextmanager
    def batch(self) -> Iterator[None]:
        """Group every append of this thread until the block ends into one signed append.

        The log is checked on entry, so a broken log refuses the call before it acts; the
        events are written when the block ends, whether or not it raised. Nested blocks
        join the outermost one.
        """
        if getattr(self._local, "buffer", None) is not None:
            yield
            return
        self._flush([])
        self._local.buffer = []
        try:
            yield
        finally:
            buffered: list[dict[str, Any]] = self._local.buffer
            self._local.buffer = None
            if buffered:
                self._flush(buffered)

    def _draft(self, event: str, mode: str | None, data: Mapping[str, Any]) -> dict[str, Any]:
        if not isinstance(event, str) or not event:
            raise StateError(f"cannot append to {self.path}: event must be a non-empty string")
        if event == CHECKPOINT:
            raise StateError(f"cannot append to {self.path}: {CHECKPOINT!r} lines are written by the log itself")
        try:
            normalised = bounded(json.loads(canonical_json(dict(data))))
        except (TypeError, ValueError) as exc:
            raise StateError(f"cannot append {event!r} to {self.path}: data is not JSON-serialisable ({exc})") from exc
        return {"ts": _now(), "event": event, "mode": mode, "data": normalised}

    def _flush(self, drafts: list[dict[str, Any]]) -> None:
        """Under the lock: check (and if need be recover) the log, then write ``drafts`` and a
        checkpoint in one write and one fsync, then record the checkpoint in the home."""
        signer = audit_signing_key(self.home)
        fingerprint = public_key_fingerprint(signer.public_key())
        with file_lock(self.path):
            seq, prev, recovered = self._prepare()
            if recovered is not None:
                drafts = [recovered, *drafts]
            if not drafts:
                return
            out = bytearray()
            for draft in drafts:
                record = {"seq": seq, "ts": draft["ts"], "event": draft["event"], "mode": draft["mode"]}
                record["data"], record["prev"] = draft["data"], prev
                record["hash"] = prev = record_hash(record)
                draft.clear()
                draft.update(record)
                out += _dump(record)
                seq += 1
            ts = _now()
            signature = signer.sign(checkpoint_payload(seq, ts, prev, fingerprint))
            checkpoint: dict[str, Any] = {
                "seq": seq,
                "ts": ts,
                "event": CHECKPOINT,
                "mode": None,
                "data": {"key": fingerprint, "signature": base64.b64encode(signature).decode("ascii")},
                "prev": prev,
            }
            checkpoint["hash"] = record_hash(checkpoint)
            out += _dump(checkpoint)
            size = self._write(bytes(out))
            self._write_anchor(checkpoint, size)

    def _prepare(self) -> tuple[int, str, dict[str, Any] | None]:
        """(next seq, prev hash, recovery event or None) of a log known to be intact."""
        stat = self.path.stat() if self.path.exists() else None
        key = (stat.st_dev, stat.st_ino) if stat else None
        try:
            anchor = self._read_anchor()
            if anchor is not None and stat is not None and key in _CHECKED and stat.st_size == anchor.size:
                self._check_last_line(anchor)
                return anchor.seq + 1, anchor.hash, None
            scan = self._scan(anchor)
            recovered = self._recover(scan, anchor)
        except _Broken as broken:
            if key is not None:
                _CHECKED.discard(key)
            raise self._error(broken) from None
        if key is not None:
            _CHECKED.add(key)
        cp = scan.checkpoint
        return (cp["seq"] + 1, cp["hash"], recovered) if cp else (0, GENESIS, recovered)

    def _recover(self, scan: _Scan, anchor: _Anchor | None) -> dict[str, Any] | None:
        """Accept the log up to its last checkpoint; move a crashed append's remains aside.

        Only what an interrupted append can leave is recovered: chained lines of this
        writer's format after the last checkpoint, the last of them possibly cut off.
        """
        if scan.fault is not None and not scan.fault_is_torn_end:
            raise scan.fault
        signed = audit_public_key(self.home) if scan.checkpoint is not None else None
        problem = self._first_problem(scan, anchor, signed, tail_ok=True)
        if problem is not None:
            raise problem
        size = self.path.stat().st_size if self.path.exists() else 0
        if size == scan.signed_size:
            return None
        with open(self.path, "rb") as log:
            log.seek(scan.signed_size)
            tail = log.read()
        name = f"{self.path.name}.unsigned-{datetime.now(UTC):%Y%m%dT%H%M%S%f}"
        if not atomic_create_bytes(self.path.with_name(name), tail, mode=0o644):
            raise _Broken(scan.checkpoint_line + 1, f"cannot keep the unsigned lines aside: {name} exists")
        try:
            os.truncate(self.path, scan.signed_size)
        except OSError as exc:
            raise StateError(f"cannot truncate {self.path}: {exc.strerror or exc}") from exc
        return {
            "ts": _now(),
            "event": "audit_recovered",
            "mode": None,
            "data": {
                "reason": "lines after the last signed checkpoint (an append cut off by a crash, or written "
                "outside snodo) were moved aside; they are not part of the log",
                "first_line": scan.checkpoint_line + 1,
                "lines": tail.count(b"\n") + (0 if tail.endswith(b"\n") else 1),
                "bytes": len(tail),
                "sha256": hashlib.sha256(tail).hexdigest(),
                "kept_in": name,
            },
        }

    def _first_problem(
        self, scan: _Scan, anchor: _Anchor | None, key: Ed25519PublicKey | None, *, tail_ok: bool = False
    ) -> _Broken | None:
        """The earliest fault: a broken line, a home checkpoint the log does not hold, an
        unsigned tail (unless ``tail_ok``), a last checkpoint whose signature fails."""
        problems: list[_Broken] = []
        if scan.fault is not None and not tail_ok:
            problems.append(scan.fault)
        if anchor is not None:
            where = anchor.seq + 1
            if scan.anchor_hash is None:
                problems.append(
                    _Broken(
                        min(scan.lines + 1, where),
                        f"the log has {scan.lines} intact lines but {self.home} recorded a signed checkpoint at "
                        f"line {where}: lines were removed (truncated, deleted, or rolled back to an older copy)",
                    )
                )
            elif scan.anchor_hash != anchor.hash:
                problems.append(
                    _Broken(
                        where,
                        f"line {where} is not the signed checkpoint {self.home} recorded there: the log was "
                        "rewritten or replaced by another copy",
                    )
                )
        # Lines after the last checkpoint are unsigned; but when the chain breaks there, the
        # break is the fault to name (it is why no checkpoint covers them), unless it is only
        # a write cut off at the very end.
        broken_there = scan.fault is not None and not scan.fault_is_torn_end
        if scan.lines > scan.checkpoint_line and not tail_ok and not broken_there:
            problems.append(
                _Broken(
                    scan.checkpoint_line + 1,
                    "not covered by a signed checkpoint (appended outside snodo, or an append was cut off)",
                )
            )
        if scan.checkpoint is not None:
            why = (
                check_signature(scan.checkpoint, key)
                if key is not None
                else "cannot check the checkpoint: no trusted audit key"
            )
            if why:
                problems.append(_Broken(scan.checkpoint_line, why))
        if not problems:
            return None
        return min(problems, key=lambda p: p.line or 0)

    def _check_last_line(self, anchor: _Anchor) -> None:
        """Cheap check: the log's last line is intact and is the checkpoint the home names."""
        lineno = anchor.seq + 1
        with open(self.path, "rb") as log:
            raw = _last_line(log, anchor.size)
        record = _parse_line(raw, lineno)
        if record["seq"] != anchor.seq or record["hash"] != anchor.hash:
            raise _Broken(lineno, f"the last line is not the signed checkpoint {self.home} recorded")
        if record_hash(record) != record["hash"]:
            raise _Broken(lineno, "hash does not match the record's content")

    def _write(self, data: bytes) -> int:
        created = not self.path.exists()
        try:
            fd = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
            try:
                view = memoryview(data)
                while view:
                    view = view[os.write(fd, view) :]
                _datasync(fd)  # the one fsync of the append
                stat = os.fstat(fd)
                if created:
                    _CHECKED.add((stat.st_dev, stat.st_ino))
            finally:
                os.close(fd)
            if created:
                dir_fd = os.open(self.path.parent, os.O_RDONLY)
                try:
                    os.fsync(dir_fd)
                finally:
                    os.close(dir_fd)
        except OSError as exc:
            raise StateError(f"cannot append to {self.path}: {exc.strerror or exc}") from exc
        return stat.st_size

    # ----------------------------------------------------------------- the home's checkpoint

    def _read_anchor(self) -> _Anchor | None:
        try:
            raw = read_json(self.anchor_path)
        except FileNotFoundError:
            return None
        except StateError as exc:
            raise _Broken(None, f"the checkpoint recorded in the home is unreadable: {exc.message}") from None
        if (
            not isinstance(raw, dict)
            or type(raw.get("seq")) is not int
            or type(raw.get("size")) is not int
            or not isinstance(raw.get("hash"), str)
        ):
            raise _Broken(None, f"the checkpoint recorded in the home ({self.anchor_path}) is not valid")
        return _Anchor(seq=raw["seq"], hash=raw["hash"], size=raw["size"])

    def _read_anchor_or_broken(self) -> _Anchor | _Broken | None:
        try:
            return self._read_anchor()
        except _Broken as broken:
            return broken

    def _write_anchor(self, checkpoint: Mapping[str, Any], size: int) -> None:
        """Replace the home's checkpoint. Not fsynced: the log was, and a checkpoint lost in a
        crash only leaves the home one append behind, which is never a false alarm."""
        path = self.anchor_path
        body = {
            "log": os.path.realpath(self.path),
            "seq": checkpoint["seq"],
            "hash": checkpoint["hash"],
            "size": size,
            "ts": checkpoint["ts"],
            "key": checkpoint["data"]["key"],
            "signature": checkpoint["data"]["signature"],
        }
        try:
            path.parent.mkdir(mode=0o700, exist_ok=True)
            fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
            try:
                with os.fdopen(fd, "wb") as handle:
                    handle.write(canonical_json(body))
                os.replace(tmp, path)
            except BaseException:
                with contextlib.suppress(OSError):
                    os.unlink(tmp)
                raise
        except OSError as exc:
            raise StateError(f"cannot record the audit checkpoint in {path}: {exc.strerror or exc}") from exc

    # ----------------------------------------------------------------- internals

    def _lines(self) -> Iterator[bytes]:
        """The log's raw lines; none if it does not exist yet."""
        try:
            with open(self.path, "rb") as log:
                yield from log
        except FileNotFoundError:
            return
        except OSError as exc:
            raise StateError(f"cannot read {self.path}: {exc.strerror or exc}") from exc

    def _scan(self, anchor: _Anchor | None) -> _Scan:
        """One pass: chain every line, stop at the first fault, note the last checkpoint."""
        prev, lines, events, offset = GENESIS, 0, 0, 0
        checkpoint: dict[str, Any] | None = None
        checkpoint_line = checkpoints = signed_size = 0
        fault: _Broken | None = None
        torn = False
        anchor_seq = anchor.seq if anchor is not None else -1
        anchor_hash: str | None = None
        last_checkpoint_raw = b""
        for lineno, raw in enumerate(self._lines(), start=1):
            fast = _fast_link(raw, lineno, prev)
            if fast is not None:
                prev, is_checkpoint = fast
            else:
                try:
                    record = _parse_line(raw, lineno)
                    _check_record(record, lineno, prev)
                except _Broken as broken:
                    fault = broken
                    torn = not raw.endswith(b"\n")
                    break
                prev, is_checkpoint = record["hash"], record["event"] == CHECKPOINT
            lines, offset = lineno, offset + len(raw)
            if lineno - 1 == anchor_seq:
                anchor_hash = prev
            if is_checkpoint:
                last_checkpoint_raw, checkpoint_line, signed_size = raw, lineno, offset
                checkpoints += 1
            else:
                events += 1
        if last_checkpoint_raw:
            try:
                checkpoint = _parse_line(last_checkpoint_raw, checkpoint_line)
                _check_record(checkpoint, checkpoint_line, checkpoint["prev"])  # its shape
            except _Broken as broken:
                checkpoint, fault = None, broken
        return _Scan(
            lines=lines,
            events=events,
            checkpoint=checkpoint,
            checkpoint_line=checkpoint_line,
            checkpoints=checkpoints,
            signed_size=signed_size,
            fault=fault,
            fault_is_torn_end=torn,
            anchor_hash=anchor_hash,
        )

    def _error(self, broken: _Broken) -> AuditChainError:
        where = f"line {broken.line}" if broken.line else "its checkpoint"
        return AuditChainError(
            f"audit log {self.path} is broken at {where}: {broken.reason}",
            line=broken.line,
            reason=broken.reason,
            hint="nothing is appended to a broken log; `snodo audit verify` shows the first "
            f"fault; restore the log from a backup, or move {self.path.name} aside to start a new one "
            "(see docs/architecture.md, audit log)",
        )


@frozen(kw_only=True)
class Export:
    log_file: Path
    key_file: Path
    report: VerifyReport


def export_log(log: AuditLog, dest: Path) -> Export:
    """Copy ``log`` (taken under its lock, so no append is half in it) and the audit public
    key into ``dest``; the copy is verified with that key alone before this returns.

    A broken log is not exported: the error says where it breaks.
    """
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


def _events_before(log: AuditLog, line: int) -> int:
    """Events on the lines before ``line`` (for a report that stops inside the signed part)."""
    count = 0
    for lineno, raw in enumerate(log._lines(), start=1):
        if lineno >= line:
            break
        if b'"event":"checkpoint"' not in raw:
            count += 1
    return count


def _datasync(fd: int) -> None:
    """Data and the size that reaches it (enough to read the file back), without timestamps."""
    sync = getattr(os, "fdatasync", os.fsync)
    sync(fd)


def _now() -> str:
    return datetime.now(UTC).isoformat(timespec="microseconds")


def _dump(record: Mapping[str, Any]) -> bytes:
    """A line is the canonical JSON of the whole record, so that the canonical JSON of the
    six hashed fields is the line with its ``hash`` member cut out (see :func:`_fast_link`)."""
    return canonical_json(record) + b"\n"


_HASH_MEMBER = b',"hash":"'
_CHECKPOINT_EVENT = b',"event":"checkpoint"'


def _fast_link(raw: bytes, lineno: int, prev: str) -> tuple[str, bool] | None:
    """``(hash, is_checkpoint)`` of a canonical line that links to ``prev``, checked on its
    bytes without parsing them; None sends the line through the full check.

    With sorted keys the record's own ``hash`` member is the last ``,"hash":"`` of the line
    (inside string values quotes are escaped; only ``mode``, ``prev``, ``seq`` and ``ts``
    follow it), and cutting it out leaves exactly the canonical JSON the hash covers. A
    line passing this is byte for byte what its hash commits to, and the signed checkpoint
    after it commits to that hash, so parsing it would prove nothing more. Anything else
    (another key order, spacing, a broken link) takes the slow path, which names the fault.
    """
    if not raw.endswith(b"}\n"):
        return None
    cut = raw.rfind(_HASH_MEMBER)
    if cut < 0 or raw[cut + 73 : cut + 74] != b'"':
        return None
    claimed = raw[cut + 9 : cut + 73]
    digest = hashlib.sha256(raw[:cut])
    digest.update(raw[cut + 74 : -1])
    if digest.hexdigest().encode("ascii") != claimed:
        return None
    tail = raw[cut + 74 :]
    at = tail.rfind(b',"prev":"')
    if at < 0 or tail[at + 9 : at + 73] != prev.encode("ascii") or tail[at + 73 : at + 81] != b'","seq":':
        return None
    digits = tail[at + 81 : tail.find(b",", at + 81)]
    if digits != str(lineno - 1).encode("ascii"):
        return None
    return claimed.decode("ascii"), raw[cut - len(_CHECKPOINT_EVENT) : cut] == _CHECKPOINT_EVENT


def _last_line(log: BinaryIO, size: int) -> bytes:
    """The final line of a file of ``size`` bytes, read backwards from the end."""
    block = 8192
    while True:
        start = max(0, size - block)
        log.seek(start)
        chunk = log.read(size - start)
        cut = chunk.rfind(b"\n", 0, len(chunk) - 1)
        if cut >= 0 or start == 0:
            return bytes(chunk[cut + 1 :])
        block *= 2
