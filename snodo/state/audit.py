"""The project's signed, hash-chained audit log, ``audit.log`` in its runtime state
(:mod:`snodo.state.runtime`: ``<git-common-dir>/snodo/``).

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
(and whenever its size is not what the home's checkpoint says), unless the file is the very
one the home recorded after the last append (device, inode, mtime and ctime: no process
wrote it since); later appends only compare the last line with that checkpoint, and read
nothing while the log and the home's two slots are the files this process's own last
append left. A governed call costs what it appends, not the length of the log's history.
"""

from __future__ import annotations

import base64
import contextlib
import hashlib
import json
import os
import threading
from collections import deque
from collections.abc import Iterator, Mapping
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from attrs import frozen
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey

from snodo.base.errors import AuditChainError, StateError
from snodo.state.atomic import atomic_create_bytes, canonical_json, file_lock
from snodo.state.audit_chain import (
    CHECKPOINT,
    GENESIS,
    KEY_MISMATCH,
    LARGE_STRING_CHARS,
    Anchor,
    ChainBreak,
    Scan,
    bounded,
    check_signature,
    checkpoint_payload,
    first_problem,
    last_line,
    linked_line,
    parse_line,
    record_hash,
    scan_lines,
)
from snodo.state.audit_checkpoint import file_identity, read_anchor, slots, write_anchor
from snodo.state.audit_key import audit_public_key, audit_signing_key, signing_key_and_fingerprint
from snodo.state.home import snodo_home
from snodo.state.keys import public_key_fingerprint

__all__ = ["AuditLog", "VerifyReport", "bounded", "check_signature", "record_hash"]


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


# Logs (by device and inode) whose whole chain this process has checked. Process-wide rather
# than per AuditLog, so code that builds a fresh AuditLog for every event does not rescan
# the whole log each time. Only touched under the log's exclusive lock.
_CHECKED: set[tuple[int, int]] = set()

#: What this process's last append left, by log (real path): the checkpoint the home then
#: recorded (with the log file's identity, :attr:`Anchor.file`) and the identity of the
#: home's two slot files. A log and slots still exactly so have been written by no one since
#: (any write sets a ctime, which no process can set back), so the next append reads neither
#: to check them. Only touched under the log's exclusive lock.
#: Also which slot that append wrote and its write number, so the next one writes the other
#: slot without reading either (:func:`write_anchor`'s ``last``).
_LEFT: dict[str, tuple[Anchor, tuple[tuple[int, ...] | None, ...], tuple[int, int]]] = {}


def _identities(paths: tuple[Path, ...]) -> tuple[tuple[int, ...] | None, ...]:
    found: list[tuple[int, ...] | None] = []
    for path in paths:
        try:
            st = os.stat(path)
        except OSError:
            found.append(None)
        else:
            found.append((*file_identity(st), st.st_size))
    return tuple(found)


class AuditLog:
    """Append-only, signed, hash-chained audit log shared by every process of a project.

    ``home`` is the ``$SNODO_HOME`` holding the audit key and the checkpoints; by default
    the current one, looked up on first use.
    """

    def __init__(self, path: Path, home: Path | None = None) -> None:
        self.path = Path(path)
        self._home = home
        self._local = threading.local()
        self._anchor: tuple[str, Path] | None = None

    @property
    def home(self) -> Path:
        if self._home is None:
            self._home = snodo_home()
        return self._home

    @property
    def anchor_path(self) -> Path:
        """Where the home keeps this log's last checkpoint (keyed by the log's real path)."""
        return self._anchor_for(os.path.realpath(self.path))

    def _anchor_for(self, real: str) -> Path:
        cached = self._anchor
        if cached is None or cached[0] != real:
            key = hashlib.sha256(real.encode("utf-8", "surrogateescape")).hexdigest()[:16]
            self._anchor = cached = real, self.home / "audit" / f"{key}.json"
        return cached[1]

    # ----------------------------------------------------------------- reading

    def verify(self, *, key: Ed25519PublicKey | None = None, anchored: bool = True) -> VerifyReport:
        """Check every line, the last checkpoint's signature and the home's checkpoint.

        ``key`` is the trusted audit public key (default: this home's); ``anchored=False``
        skips the home's checkpoint, for a log checked on another machine. A log that has
        checkpoints but no key to check them against raises :class:`StateError`.
        """
        with file_lock(self.path, shared=True):
            anchor = self._read_anchor_or_broken() if anchored else None
            if isinstance(anchor, ChainBreak):
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
            for lineno, raw in enumerate(self.lines(), start=1):
                try:
                    record = parse_line(raw, lineno)
                except ChainBreak as broken:
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
        record, encoded = self._draft(event, mode, data)
        buffer: list[dict[str, Any]] | None = getattr(self._local, "buffer", None)
        if buffer is not None:
            buffer.append(record)
            self._local.encoded.append(encoded)
        else:
            self._flush([record], [encoded])
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
        self._local.buffer, self._local.encoded = [], []
        try:
            yield
        finally:
            buffered: list[dict[str, Any]] = self._local.buffer
            encoded: list[bytes | None] = self._local.encoded
            self._local.buffer = self._local.encoded = None
            if buffered:
                self._flush(buffered, encoded)

    def _draft(self, event: str, mode: str | None, data: Mapping[str, Any]) -> tuple[dict[str, Any], bytes | None]:
        """The event's record (its data as JSON reads it back, over-long strings bounded)
        and the canonical JSON of that data when it is the same bytes (``None`` if bounding
        changed it)."""
        if not isinstance(event, str) or not event:
            raise StateError(f"cannot append to {self.path}: event must be a non-empty string")
        if event == CHECKPOINT:
            raise StateError(f"cannot append to {self.path}: {CHECKPOINT!r} lines are written by the log itself")
        try:
            encoded = canonical_json(dict(data))
            normalised = json.loads(encoded)
        except (TypeError, ValueError) as exc:
            raise StateError(f"cannot append {event!r} to {self.path}: data is not JSON-serialisable ({exc})") from exc
        record = {"ts": _now(), "event": event, "mode": mode, "data": normalised}
        if len(encoded) <= LARGE_STRING_CHARS:  # no string of a shorter encoding is over-long
            return record, encoded
        record["data"] = bounded(normalised)
        return record, None

    def _flush(self, drafts: list[dict[str, Any]], encoded: list[bytes | None] | None = None) -> None:
        """Under the lock: check (and if need be recover) the log, then write ``drafts`` and a
        checkpoint in one write and one fsync, then record the checkpoint in the home.
        ``encoded``: each draft's data as canonical JSON, where known (see :meth:`_draft`)."""
        audit_signing_key(self.home)  # made (or refused) before the lock is taken
        with file_lock(self.path):
            real = os.path.realpath(self.path)  # once per append: what every step below is keyed by
            seq, prev, recovered, last = self._prepare(real)
            encoded = list(encoded) if encoded is not None else [None] * len(drafts)
            if recovered is not None:
                drafts, encoded = [recovered, *drafts], [None, *encoded]
            if drafts:
                self._append_signed(drafts, seq, prev, real, last, encoded)

    def _append_signed(
        self,
        drafts: list[dict[str, Any]],
        seq: int,
        prev: str,
        real: str | None = None,
        last: tuple[int, int] | None = None,
        encoded: list[bytes | None] | None = None,
    ) -> None:
        """Under the lock: chain ``drafts`` from ``seq``/``prev``, sign a checkpoint after them,
        write all in one write and one fsync, then record the checkpoint in the home (in the
        slot after ``last``, the slot and write number this process's previous append left,
        when the slots are still as it left them)."""
        real = os.path.realpath(self.path) if real is None else real
        signer, fingerprint = signing_key_and_fingerprint(self.home)
        out = bytearray()
        for i, draft in enumerate(drafts):
            record = {"seq": seq, "ts": draft["ts"], "event": draft["event"], "mode": draft["mode"]}
            record["data"], record["prev"] = draft["data"], prev
            record["hash"], line = linked_line(record, encoded[i] if encoded is not None else None)
            prev = record["hash"]
            draft.clear()
            draft.update(record)
            out += line
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
        checkpoint["hash"], line = linked_line(checkpoint)
        out += line
        written = self._write(bytes(out))
        where = self._anchor_for(real)
        wrote = write_anchor(where, real, checkpoint, written.st_size, written, last=last)
        anchor = Anchor(seq=seq, hash=checkpoint["hash"], size=written.st_size, file=file_identity(written))
        _LEFT[real] = (anchor, _identities(slots(where)), wrote)

    def _prepare(self, real: str) -> tuple[int, str, dict[str, Any] | None, tuple[int, int] | None]:
        """(next seq, prev hash, recovery event or None, the home slot last written and its
        write number when known without reading) of a log known to be intact."""
        try:
            stat: os.stat_result | None = os.stat(self.path)
        except (FileNotFoundError, NotADirectoryError):
            stat = None
        key = (stat.st_dev, stat.st_ino) if stat else None
        left = _LEFT.get(real)
        unwritten = left is not None and stat is not None and left[0].file == file_identity(stat)
        if left is not None and unwritten and left[1] == _identities(slots(self._anchor_for(real))):
            return left[0].seq + 1, left[0].hash, None, left[2]
        _LEFT.pop(real, None)
        try:
            anchor = read_anchor(self._anchor_for(real))
            # Checked by this process, or left exactly as the last append (of any process) left it.
            known = key in _CHECKED or (anchor is not None and stat is not None and anchor.file == file_identity(stat))
            if anchor is not None and stat is not None and known and stat.st_size == anchor.size:
                self._check_last_line(anchor)
                return anchor.seq + 1, anchor.hash, None, None
            scan = self._scan(anchor)
            recovered = self._recover(scan, anchor)
        except ChainBreak as broken:
            if key is not None:
                _CHECKED.discard(key)
            raise self._error(broken) from None
        if key is not None:
            _CHECKED.add(key)
        cp = scan.checkpoint
        return (cp["seq"] + 1, cp["hash"], recovered, None) if cp else (0, GENESIS, recovered, None)

    def _recover(self, scan: Scan, anchor: Anchor | None) -> dict[str, Any] | None:
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
            raise ChainBreak(scan.checkpoint_line + 1, f"cannot keep the unsigned lines aside: {name} exists")
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
        self, scan: Scan, anchor: Anchor | None, key: Ed25519PublicKey | None, *, tail_ok: bool = False
    ) -> ChainBreak | None:
        return first_problem(scan, anchor, key, home=self.home, tail_ok=tail_ok)

    def _check_last_line(self, anchor: Anchor) -> None:
        """Cheap check: the log's last line is intact and is the checkpoint the home names."""
        lineno = anchor.seq + 1
        with open(self.path, "rb") as log:
            raw = last_line(log, anchor.size)
        record = parse_line(raw, lineno)
        if record["seq"] != anchor.seq or record["hash"] != anchor.hash:
            raise ChainBreak(lineno, f"the last line is not the signed checkpoint {self.home} recorded")
        if record_hash(record) != record["hash"]:
            raise ChainBreak(lineno, "hash does not match the record's content")

    def _write(self, data: bytes) -> os.stat_result:
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
        return stat

    # ----------------------------------------------------------------- the home's checkpoint

    def _read_anchor(self) -> Anchor | None:
        return read_anchor(self.anchor_path)

    def _read_anchor_or_broken(self) -> Anchor | ChainBreak | None:
        try:
            return self._read_anchor()
        except ChainBreak as broken:
            return broken

    # ----------------------------------------------------------------- internals

    def lines(self) -> Iterator[bytes]:
        """The log's raw lines; none if it does not exist yet."""
        try:
            with open(self.path, "rb") as log:
                yield from log
        except FileNotFoundError:
            return
        except OSError as exc:
            raise StateError(f"cannot read {self.path}: {exc.strerror or exc}") from exc

    def _scan(self, anchor: Anchor | None) -> Scan:
        return scan_lines(self.lines(), anchor)

    def _error(self, broken: ChainBreak) -> AuditChainError:
        where = f"line {broken.line}" if broken.line else "its checkpoint"
        if KEY_MISMATCH in broken.reason:
            # The log is intact as far as anyone can tell: what changed is the key judging it.
            return AuditChainError(
                f"audit log {self.path} is broken at {where}: {broken.reason}. This home ({self.home}) "
                "holds other keys than the ones that signed the log: the home's keys were replaced "
                "(a new home is a new identity), or the log was signed by someone else",
                line=broken.line,
                reason=broken.reason,
                hint="if your old home still exists, point SNODO_HOME at it or restore its keys/ directory; "
                'if its keys are gone for good, a person runs `snodo audit restart --reason "home replaced"` '
                "(a new log whose first signed line records the old head), and a listed person adds the new keys "
                "to .snodo/allowed_signers (`snodo keys show`, then `snodo protocol sign`)",
            )
        return AuditChainError(
            f"audit log {self.path} is broken at {where}: {broken.reason}",
            line=broken.line,
            reason=broken.reason,
            hint="nothing is appended to a broken log; `snodo audit verify` shows the first fault. Restore "
            "the log from a backup; if it is lost (git clean, a fresh clone), a person runs "
            '`snodo audit restart --reason "..."`: a new log whose first signed line records the lost head '
            "(see docs/architecture.md, audit log)",
        )


def _datasync(fd: int) -> None:
    """Data and the size that reaches it (enough to read the file back), without timestamps."""
    sync = getattr(os, "fdatasync", os.fsync)
    sync(fd)


def _now() -> str:
    return datetime.now(UTC).isoformat(timespec="microseconds")


def _events_before(log: AuditLog, line: int) -> int:
    """Events on the lines before ``line`` (for a report that stops inside the signed part)."""
    count = 0
    for lineno, raw in enumerate(log.lines(), start=1):
        if lineno >= line:
            break
        if b'"event":"checkpoint"' not in raw:
            count += 1
    return count
