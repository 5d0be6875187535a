"""The project's signed, hash-chained audit log (docs/architecture.md, "Evidence"); formats in :mod:`.audit_chain`."""

from __future__ import annotations

import base64
import contextlib
import functools
import hashlib
import itertools
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
from snodo.state.atomic import atomic_create_bytes, canonical_json, file_lock, fsync_dir
from snodo.state.audit_chain import (
    CHECKPOINT,
    GENESIS,
    KEY_MISMATCH,
    LARGE_STRING_CHARS,
    Anchor,
    ChainBreak,
    Scan,
    bounded,
    check_record,
    checkpoint_payload,
    file_identity,
    first_problem,
    last_line,
    linked_line,
    parse_line,
    read_anchor,
    scan_lines,
    slot_identities,
    write_anchor,
)
from snodo.state.audit_key import audit_public_key, audit_signing_key, signing_key_and_fingerprint
from snodo.state.home import snodo_home
from snodo.state.keys import public_key_fingerprint

#: An event's record and the canonical JSON of its data when known (see ``AuditLog._draft``).
Draft = tuple[dict[str, Any], bytes | None]


@frozen(kw_only=True)
class VerifyReport:
    """Outcome of checking a log: ``line`` (1-based) and ``reason`` name the first fault,
    ``count`` the events (checkpoint lines excluded) before it."""

    ok: bool
    count: int
    line: int | None = None
    reason: str = ""
    checkpoints: int = 0
    key: str = ""


# Process-wide, touched under the log's lock only. _CHECKED: logs (device, inode) whose whole
# chain this process checked. _LEFT, by log (real path): the home's record this process's last
# append wrote and the slots' identities then; while the log and the slots are still so, neither is read again.
_CHECKED: set[tuple[int, int] | None] = set()
_LEFT: dict[str, tuple[Anchor, tuple[tuple[int, ...] | None, ...]]] = {}


class AuditLog:
    """Shared by every process of a project; ``home`` holds the audit key and the checkpoints."""

    def __init__(self, path: Path, home: Path | None = None) -> None:
        self.path = Path(path)
        self._home = home
        self._local = threading.local()

    @property
    def home(self) -> Path:
        if self._home is None:
            self._home = snodo_home()
        return self._home

    @property
    def anchor_path(self) -> Path:
        return _anchor_file(self.home, os.path.realpath(self.path))

    def verify(self, *, key: Ed25519PublicKey | None = None) -> VerifyReport:
        """Check every line, the home's checkpoint and the last checkpoint's signature with
        ``key`` (default: this home's audit key)."""
        with file_lock(self.path, shared=True):
            try:
                anchor = read_anchor(self.anchor_path)
            except ChainBreak as broken:
                return VerifyReport(ok=False, count=0, line=broken.line, reason=broken.reason)
            scan = scan_lines(self.lines(), anchor)
            trusted = key
            if trusted is None and scan.checkpoint is not None:
                trusted = audit_public_key(self.home)
                if trusted is None:
                    raise StateError(
                        f"cannot verify {self.path}: this home ({self.home}) has no audit key",
                        hint="verify the log with the key that signed it: `snodo audit verify --key PUBKEY FILE`",
                    )
        problem = first_problem(scan, anchor, trusted, home=self.home)
        fingerprint = public_key_fingerprint(trusted) if trusted else ""
        if problem is None:
            return VerifyReport(ok=True, count=scan.events, checkpoints=scan.checkpoints, key=fingerprint)
        line = problem.line or 1
        return VerifyReport(
            ok=False,
            count=scan_lines(itertools.islice(self.lines(), line - 1), None).events,
            line=line,
            reason=problem.reason,
            checkpoints=scan.checkpoints,
            key=fingerprint,
        )

    def records(self, event: str | None = None, last: int | None = None) -> list[dict[str, Any]]:
        """Events in order, or only ``event`` ones (checkpoints only if asked for); the ``last`` N."""
        found: deque[dict[str, Any]] = deque(maxlen=last)
        with file_lock(self.path, shared=True):
            for lineno, raw in enumerate(self.lines(), start=1):
                try:
                    record = parse_line(raw, lineno)
                except ChainBreak as broken:
                    raise self._error(broken) from None
                if record["event"] == event or (event is None and record["event"] != CHECKPOINT):
                    found.append(record)
        return list(found)

    def append(self, event: str, *, mode: str | None, data: Mapping[str, Any]) -> dict[str, Any]:
        """Append one event and return its record; refuse if the log is broken. Inside
        :meth:`batch` the record is written (and completed) when the outermost batch ends."""
        draft = self._draft(event, mode, data)
        buffer: list[Draft] | None = getattr(self._local, "buffer", None)
        if buffer is not None:
            buffer.append(draft)
        else:
            self._flush([draft])
        return draft[0]

    @contextlib.contextmanager
    def batch(self) -> Iterator[None]:
        """Group this thread's appends until the outermost block ends (raised or not) into one
        signed append; a broken log refuses on entry, before the call acts."""
        if getattr(self._local, "buffer", None) is not None:
            yield
            return
        self._flush([])
        self._local.buffer = []
        try:
            yield
        finally:
            buffered: list[Draft] = self._local.buffer
            self._local.buffer = None
            if buffered:
                self._flush(buffered)

    def _draft(self, event: str, mode: str | None, data: Mapping[str, Any]) -> Draft:
        """The event's record (its data as JSON reads it back, over-long strings bounded) and
        that data's canonical JSON (``None`` if bounding changed it)."""
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

    def _flush(self, drafts: list[Draft]) -> None:
        """Under the lock: check (and if need be recover) the log, append ``drafts`` and a checkpoint."""
        audit_signing_key(self.home)  # made (or refused) before the lock is taken
        with file_lock(self.path):
            real = os.path.realpath(self.path)  # once per append: what every step below is keyed by
            seq, prev, recovered, anchor = self._prepare(real)
            if recovered is not None:
                drafts = [(recovered, None), *drafts]
            if drafts:
                self._append_signed(drafts, seq, prev, real, anchor)

    def _append_signed(self, drafts: list[Draft], seq: int, prev: str, real: str, anchor: Anchor | None) -> None:
        """Under the lock: chain ``drafts`` from ``seq``/``prev`` and a signed checkpoint, write them
        with one write and one fsync, then record the checkpoint in the home (last: ``anchor``)."""
        signer, fingerprint = signing_key_and_fingerprint(self.home)
        out = bytearray()
        for n, (draft, encoded) in enumerate(drafts, start=seq):
            record = {"seq": n, **draft, "prev": prev}  # a draft holds ts, event, mode and data, in that order
            prev, line = linked_line(record, encoded)
            draft.clear()
            draft.update(record, hash=prev)
            out += line
        seq += len(drafts)
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
        where = _anchor_file(self.home, real)
        anchor = write_anchor(where, real, checkpoint, written, anchor)
        _LEFT[real] = (anchor, slot_identities(where))

    def _prepare(self, real: str) -> tuple[int, str, dict[str, Any] | None, Anchor | None]:
        """(next seq, prev hash, recovery event or None, the home's record) of a log known to be
        intact. Checked: nothing while the log and slots are as this process's last append left
        them; only the last line of a log this process checked, or that is exactly as the last
        append (of any process) left it; else the whole log, recovered if need be."""
        try:
            stat: os.stat_result | None = os.stat(self.path)
        except (FileNotFoundError, NotADirectoryError):
            stat = None
        where = _anchor_file(self.home, real)
        left = _LEFT.get(real)
        if (
            left is not None
            and stat is not None
            and left[0].file == file_identity(stat)
            and left[1] == slot_identities(where)
        ):
            return left[0].seq + 1, left[0].hash, None, left[0]
        _LEFT.pop(real, None)
        key = (stat.st_dev, stat.st_ino) if stat else None
        try:
            anchor = read_anchor(where)
            seq, prev, recovered = self._check(anchor, stat, key)
        except ChainBreak as broken:
            _CHECKED.discard(key)
            raise self._error(broken) from None
        _CHECKED.add(key)
        return seq, prev, recovered, anchor

    def _check(
        self, anchor: Anchor | None, stat: os.stat_result | None, key: tuple[int, int] | None
    ) -> tuple[int, str, dict[str, Any] | None]:
        if (
            anchor is not None
            and stat is not None
            and stat.st_size == anchor.size
            and (key in _CHECKED or anchor.file == file_identity(stat))
        ):
            with open(self.path, "rb") as log:
                record = parse_line(last_line(log, anchor.size), anchor.seq + 1)
            if (record["seq"], record["hash"]) != (anchor.seq, anchor.hash):
                raise ChainBreak(anchor.seq + 1, f"the last line is not the signed checkpoint {self.home} recorded")
            check_record(record, anchor.seq + 1, record["prev"])
            return anchor.seq + 1, anchor.hash, None
        scan = scan_lines(self.lines(), anchor)
        recovered = self._recover(scan, anchor)
        cp = scan.checkpoint
        return (cp["seq"] + 1, cp["hash"], recovered) if cp else (0, GENESIS, recovered)

    def _recover(self, scan: Scan, anchor: Anchor | None) -> dict[str, Any] | None:
        """Accept the log up to its last checkpoint and move aside what only an interrupted
        append can leave: chained lines after it, the last possibly cut off."""
        if scan.fault is not None and not scan.fault_is_torn_end:
            raise scan.fault
        signed = audit_public_key(self.home) if scan.checkpoint is not None else None
        problem = first_problem(scan, anchor, signed, home=self.home, tail_ok=True)
        if problem is not None:
            raise problem
        try:
            with open(self.path, "rb") as log:
                log.seek(scan.signed_size)
                tail = log.read()
        except FileNotFoundError:
            return None
        if not tail:
            return None
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
                "lines": len(tail.removesuffix(b"\n").split(b"\n")),
                "bytes": len(tail),
                "sha256": hashlib.sha256(tail).hexdigest(),
                "kept_in": name,
            },
        }

    def _write(self, data: bytes) -> os.stat_result:
        created = not self.path.exists()
        try:
            fd = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
            try:
                view = memoryview(data)
                while view:
                    view = view[os.write(fd, view) :]
                getattr(os, "fdatasync", os.fsync)(fd)
                stat = os.fstat(fd)
                if created:
                    _CHECKED.add((stat.st_dev, stat.st_ino))
            finally:
                os.close(fd)
            if created:
                fsync_dir(self.path.parent)
        except OSError as exc:
            raise StateError(f"cannot append to {self.path}: {exc.strerror or exc}") from exc
        return stat

    def lines(self) -> Iterator[bytes]:
        try:
            with open(self.path, "rb") as log:
                yield from log
        except FileNotFoundError:
            return
        except OSError as exc:
            raise StateError(f"cannot read {self.path}: {exc.strerror or exc}") from exc

    def _error(self, broken: ChainBreak) -> AuditChainError:
        where = f"line {broken.line}" if broken.line else "its checkpoint"
        message = f"audit log {self.path} is broken at {where}: {broken.reason}"
        hint = (
            "nothing is appended to a broken log; `snodo audit verify` shows the first fault. Restore "
            "the log from a backup; if it is lost (git clean, a fresh clone), a person runs "
            '`snodo audit restart --reason "..."`: a new log whose first signed line records the lost head '
            "(see docs/architecture.md, audit log)"
        )
        if KEY_MISMATCH in broken.reason:  # the log is intact as far as anyone can tell: the key judging it changed
            message += (
                f". This home ({self.home}) holds other keys than the ones that signed the log: the home's keys "
                "were replaced (a new home is a new identity), or the log was signed by someone else"
            )
            hint = (
                "if your old home still exists, point SNODO_HOME at it or restore its keys/ directory; "
                'if its keys are gone for good, a person runs `snodo audit restart --reason "home replaced"` '
                "(a new log whose first signed line records the old head), and a listed person adds the new keys "
                "to .snodo/allowed_signers (`snodo keys show`, then `snodo protocol sign`)"
            )
        return AuditChainError(message, line=broken.line, reason=broken.reason, hint=hint)


@functools.lru_cache(maxsize=64)
def _anchor_file(home: Path, real: str) -> Path:
    return home / "audit" / f"{hashlib.sha256(real.encode('utf-8', 'surrogateescape')).hexdigest()[:16]}.json"


def _now() -> str:
    return datetime.now(UTC).isoformat(timespec="microseconds")
