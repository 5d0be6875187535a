"""The project's hash-chained audit log, ``<project>/.snodo/audit.log``.

Each line is one JSON record ``{seq, ts, event, mode, data, prev, hash}``; ``hash`` is the
SHA-256 of the canonical JSON of the other six fields and ``prev`` is the previous line's
hash (64 zeros for line 1). Editing, removing or reordering a line breaks the chain.

A chain alone cannot show that its *last* lines were cut off, so every append also writes
a small head file (``audit.head``: seq, hash and size of the log) beside the log. A log
that ends before its head is truncated. The log may run exactly one record ahead of its
head: that is an append interrupted between writing its line and writing the head, and the
next append acknowledges it.

Appends hold an exclusive lock. A process checks the whole chain on its first append (and
again whenever the log's size is not what the head says); later appends only compare the
last line with the head, so appending stays cheap on a long log. Nothing is ever appended
to a broken log.
"""

from __future__ import annotations

import hashlib
import json
import os
from collections import deque
from collections.abc import Iterator, Mapping
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, BinaryIO

from attrs import frozen

from snodo.errors import AuditChainError, StateError
from snodo.state.atomic import atomic_write_json, canonical_json, file_lock, read_json

GENESIS = "0" * 64
_HASHED_FIELDS = ("seq", "ts", "event", "mode", "data", "prev")
_ALL_FIELDS = frozenset((*_HASHED_FIELDS, "hash"))


def record_hash(record: Mapping[str, Any]) -> str:
    return hashlib.sha256(canonical_json({k: record[k] for k in _HASHED_FIELDS})).hexdigest()


@frozen(kw_only=True)
class VerifyReport:
    """Outcome of checking a log: ``line`` (1-based) and ``reason`` name the first fault."""

    ok: bool
    count: int
    line: int | None = None
    reason: str = ""


@frozen(kw_only=True)
class _Head:
    seq: int
    hash: str
    size: int


_NO_HEAD = _Head(seq=-1, hash=GENESIS, size=0)

# Logs (by device and inode) whose whole chain this process has checked. Process-wide rather
# than per AuditLog, so code that builds a fresh AuditLog for every event does not rescan
# the whole log each time. Only touched under the log's exclusive lock.
_CHECKED: set[tuple[int, int]] = set()


class _Broken(Exception):
    def __init__(self, line: int | None, reason: str) -> None:
        super().__init__(reason)
        self.line = line
        self.reason = reason


@frozen(kw_only=True)
class _Tail:
    """What a full scan learnt: the last record, and whether the head must catch up to it."""

    count: int
    last_hash: str
    size: int
    head_behind: bool


def _parse_line(raw: bytes, lineno: int) -> dict[str, Any]:
    if not raw.endswith(b"\n"):
        raise _Broken(lineno, "incomplete last line (a write was cut off)")
    try:
        record = json.loads(raw.decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise _Broken(lineno, f"not valid JSON ({exc})") from exc
    if not isinstance(record, dict) or set(record) != _ALL_FIELDS:
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


class AuditLog:
    """Append-only, hash-chained audit log shared by every process of a project."""

    def __init__(self, path: Path) -> None:
        self.path = Path(path)
        self.head_path = self.path.with_suffix(".head")

    # ----------------------------------------------------------------- reading

    def verify(self) -> VerifyReport:
        """Check every line and the head; name the first bad line and why."""
        with file_lock(self.path, shared=True):
            try:
                tail = self._scan()
            except _Broken as broken:
                return VerifyReport(
                    ok=False,
                    count=broken.line - 1 if broken.line else 0,
                    line=broken.line,
                    reason=broken.reason,
                )
        return VerifyReport(ok=True, count=tail.count)

    def records(self, event: str | None = None, last: int | None = None) -> list[dict[str, Any]]:
        """Records in order, optionally only one ``event`` and only the ``last`` N of them."""
        found: deque[dict[str, Any]] = deque(maxlen=last)
        with file_lock(self.path, shared=True):
            for lineno, raw in enumerate(self._lines(), start=1):
                try:
                    record = _parse_line(raw, lineno)
                except _Broken as broken:
                    raise self._error(broken) from None
                if event is None or record["event"] == event:
                    found.append(record)
        return list(found)

    # ----------------------------------------------------------------- appending

    def append(self, event: str, *, mode: str | None, data: Mapping[str, Any]) -> dict[str, Any]:
        """Append one event and return its record; refuse if the chain is broken."""
        if not isinstance(event, str) or not event:
            raise StateError(f"cannot append to {self.path}: event must be a non-empty string")
        try:
            normalised = json.loads(canonical_json(dict(data)))
        except (TypeError, ValueError) as exc:
            raise StateError(f"cannot append {event!r} to {self.path}: data is not JSON-serialisable ({exc})") from exc
        with file_lock(self.path):
            seq, prev = self._check_before_append()
            record: dict[str, Any] = {
                "seq": seq,
                "ts": datetime.now(UTC).isoformat(timespec="microseconds"),
                "event": event,
                "mode": mode,
                "data": normalised,
                "prev": prev,
            }
            record["hash"] = record_hash(record)
            line = json.dumps(record, separators=(",", ":"), ensure_ascii=False).encode("utf-8")
            size = self._write_line(line + b"\n")
            self._write_head(_Head(seq=seq, hash=record["hash"], size=size))
        return record

    def _check_before_append(self) -> tuple[int, str]:
        """Return (next seq, prev hash) of a log known to be intact."""
        stat = self.path.stat() if self.path.exists() else None
        key = (stat.st_dev, stat.st_ino) if stat else None
        try:
            head = self._read_head()
            if stat is None or key not in _CHECKED or stat.st_size != head.size:
                tail = self._scan()
                if tail.head_behind:
                    self._write_head(_Head(seq=tail.count - 1, hash=tail.last_hash, size=tail.size))
                if key:
                    _CHECKED.add(key)
                return tail.count, tail.last_hash
            if head.seq >= 0:
                self._check_last_line(head)
        except _Broken as broken:
            _CHECKED.discard(key)
            raise self._error(broken) from None
        return head.seq + 1, head.hash

    def _check_last_line(self, head: _Head) -> None:
        """Cheap check: the log's last line is intact and is the record the head names."""
        lineno = head.seq + 1
        with open(self.path, "rb") as log:
            raw = _last_line(log, head.size)
        record = _parse_line(raw, lineno)
        if record["seq"] != head.seq or record["hash"] != head.hash:
            raise _Broken(lineno, f"the last line is not the record the head {self.head_path.name} names")
        if record_hash(record) != record["hash"]:
            raise _Broken(lineno, "hash does not match the record's content")

    def _write_line(self, line: bytes) -> int:
        created = not self.path.exists()
        try:
            fd = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
            try:
                view = memoryview(line)
                while view:
                    view = view[os.write(fd, view) :]
                os.fsync(fd)
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

    # ----------------------------------------------------------------- internals

    def _read_head(self) -> _Head:
        try:
            raw = read_json(self.head_path)
        except FileNotFoundError:
            return _NO_HEAD
        except StateError as exc:
            raise _Broken(None, f"head file is unreadable: {exc.message}") from None
        if (
            not isinstance(raw, dict)
            or set(raw) != {"seq", "hash", "size"}
            or type(raw["seq"]) is not int
            or type(raw["size"]) is not int
            or not isinstance(raw["hash"], str)
        ):
            raise _Broken(None, f"head file {self.head_path} is not a valid head record")
        return _Head(seq=raw["seq"], hash=raw["hash"], size=raw["size"])

    def _write_head(self, head: _Head) -> None:
        atomic_write_json(self.head_path, {"seq": head.seq, "hash": head.hash, "size": head.size})

    def _lines(self) -> Iterator[bytes]:
        """The log's raw lines; none if it does not exist yet."""
        try:
            with open(self.path, "rb") as log:
                yield from log
        except FileNotFoundError:
            return
        except OSError as exc:
            raise StateError(f"cannot read {self.path}: {exc.strerror or exc}") from exc

    def _scan(self) -> _Tail:
        """Check the whole chain against the head; raise ``_Broken`` at the first fault."""
        head = self._read_head()
        prev, before_last, count, size = GENESIS, GENESIS, 0, 0
        for lineno, raw in enumerate(self._lines(), start=1):
            record = _parse_line(raw, lineno)
            _check_record(record, lineno, prev)
            before_last, prev, count = prev, record["hash"], lineno
            size += len(raw)
        last_seq = count - 1
        if last_seq < head.seq:
            raise _Broken(
                count + 1,
                f"the log ends after {count} records but its head records seq {head.seq}: the tail was truncated",
            )
        if last_seq > head.seq + 1:
            raise _Broken(head.seq + 3, "records beyond the head (the log was appended outside snodo)")
        acknowledged = prev if last_seq == head.seq else before_last
        if acknowledged != head.hash:
            raise _Broken(head.seq + 1, f"the record does not match the head {self.head_path.name}")
        return _Tail(count=count, last_hash=prev, size=size, head_behind=last_seq == head.seq + 1)

    def _error(self, broken: _Broken) -> AuditChainError:
        where = f"line {broken.line}" if broken.line else self.head_path.name
        return AuditChainError(
            f"audit log {self.path} is broken at {where}: {broken.reason}",
            line=broken.line,
            reason=broken.reason,
            hint="nothing is appended to a broken log; `snodo audit verify` shows the first "
            f"fault; restore the log from a backup, or move {self.path.name} and "
            f"{self.head_path.name} aside to start a new one",
        )


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
