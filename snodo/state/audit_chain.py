"""The audit log's formats, on their own page for an offline checker: a line (hashing, the
checkpoint signature, scanning the chain) and the home's record of the last checkpoint (two
slots written in place in turn, under the log's lock; docs/architecture.md, "Evidence")."""

from __future__ import annotations

import base64
import binascii
import functools
import hashlib
import json
import os
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any, BinaryIO

from attrs import Factory, define, frozen
from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey

from snodo.base.errors import StateError
from snodo.state.atomic import canonical_json
from snodo.state.keys import public_key_fingerprint

GENESIS = "0" * 64
CHECKPOINT = "checkpoint"
HASHED_FIELDS = ("seq", "ts", "event", "mode", "data", "prev")
ALL_FIELDS = frozenset((*HASHED_FIELDS, "hash"))
# Prefixed to the signed bytes: a checkpoint signature never passes for another snodo document's.
_CHECKPOINT_CONTEXT = b"snodo audit checkpoint v1\n"
#: How a checkpoint signed by another key than the trusted one is reported.
KEY_MISMATCH = "not by the trusted audit key"

LARGE_STRING_CHARS = 4096
"""A string in an event longer than this is recorded as digest, length and excerpt."""
EXCERPT_CHARS = 256


def checkpoint_payload(seq: int, ts: str, prev: str, key: str) -> bytes:
    """What a checkpoint's signature covers: its place, its time, the chain head, the key."""
    return _CHECKPOINT_CONTEXT + canonical_json({"seq": seq, "ts": ts, "prev": prev, "key": key})


def bounded(value: Any) -> Any:
    """``value`` with every over-long string replaced by its digest, length and an excerpt
    (an agent's 10 MB argument must not become 10 MB of audit log)."""
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
class Anchor:
    """The last checkpoint as the home recorded it, with the log file as that append left it
    (:func:`file_identity`; ``None`` in an older record), the slot holding it and, as read, its record."""

    seq: int
    hash: str
    size: int
    file: tuple[int, int, int, int] | None = None
    slot: int = 0
    write: int = -1
    record: dict[str, Any] = Factory(dict)


class ChainBreak(Exception):
    def __init__(self, line: int | None, reason: str) -> None:
        super().__init__(reason)
        self.line = line
        self.reason = reason


@define(kw_only=True)
class Scan:
    """What one pass over the log found."""

    lines: int = 0  # complete, chained lines before any fault
    checkpoints: int = 0  # checkpoint lines among them
    checkpoint: dict[str, Any] | None = None  # the last one
    checkpoint_line: int = 0
    signed_size: int = 0  # bytes up to and including the last checkpoint
    fault: ChainBreak | None = None
    fault_is_torn_end: bool = False  # the fault is an incomplete final line (a write cut off)
    anchor_hash: str | None = None  # hash of the line the home's checkpoint names, if reached

    @property
    def events(self) -> int:
        return self.lines - self.checkpoints


def parse_line(raw: bytes, lineno: int) -> dict[str, Any]:
    if not raw.endswith(b"\n"):
        raise ChainBreak(lineno, "incomplete last line (a write was cut off)")
    try:
        record = json.loads(raw)
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise ChainBreak(lineno, f"not valid JSON ({exc})") from exc
    if not isinstance(record, dict) or record.keys() != ALL_FIELDS:
        found = sorted(record) if isinstance(record, dict) else type(record).__name__
        raise ChainBreak(lineno, f"not an audit record (fields: {found})")
    return record


def check_record(record: dict[str, Any], lineno: int, prev: str) -> None:
    expected_seq = lineno - 1
    if (type(record["seq"]), record["seq"]) != (int, expected_seq):
        raise ChainBreak(lineno, f"seq is {record['seq']!r}, expected {expected_seq}")
    if record["prev"] != prev:
        raise ChainBreak(lineno, "prev does not match the hash of the line before")
    try:
        actual = linked_line(record)[0]
    except ValueError as exc:
        raise ChainBreak(lineno, f"record cannot be hashed ({exc})") from exc
    if record["hash"] != actual:
        raise ChainBreak(lineno, "hash does not match the record's content")
    if record["event"] == CHECKPOINT and not _checkpoint_shape(record):
        raise ChainBreak(lineno, "malformed checkpoint (it must hold only a key and a signature)")


def _checkpoint_shape(record: dict[str, Any]) -> bool:
    data = record["data"]
    return (
        record["mode"] is None
        and isinstance(data, dict)
        and data.keys() == {"key", "signature"}
        and all(isinstance(v, str) for v in data.values())
    )


def _signature_problem(scan: Scan, key: Ed25519PublicKey | None) -> ChainBreak | None:
    """Why the last checkpoint's signature does not verify with ``key``; None if it does."""
    checkpoint, line = scan.checkpoint, scan.checkpoint_line
    if checkpoint is None:
        return None
    if key is None:
        return ChainBreak(line, "cannot check the checkpoint: no trusted audit key")
    fingerprint = public_key_fingerprint(key)
    data = checkpoint["data"]
    if data["key"] != fingerprint:
        return ChainBreak(line, f"checkpoint signed by key {data['key']}, {KEY_MISMATCH} {fingerprint}")
    try:
        signature = base64.b64decode(data["signature"], validate=True)
        key.verify(signature, checkpoint_payload(checkpoint["seq"], checkpoint["ts"], checkpoint["prev"], data["key"]))
    except (InvalidSignature, binascii.Error, ValueError):
        return ChainBreak(line, "checkpoint signature does not verify (the log was rewritten after it was signed)")
    return None


_HASH_MEMBER = b',"hash":"'
_CHECKPOINT_EVENT = b',"event":"checkpoint"'
_MODE_MEMBER = b',"mode":'


def linked_line(record: Mapping[str, Any], data_json: bytes | None = None) -> tuple[str, bytes]:
    """The hash of ``record``'s hashed fields and its line (the whole record's canonical JSON)
    from one encoding: with sorted keys ``hash`` goes just before the last ``,"mode":``, where
    :func:`fast_link` cuts it out. ``data_json``: ``record["data"]`` encoded canonically."""
    if data_json is None:
        body = canonical_json({k: record[k] for k in HASHED_FIELDS})
    else:
        rest = canonical_json({k: record[k] for k in HASHED_FIELDS if k != "data"})
        body = b"".join((b'{"data":', data_json, b",", rest[1:]))
    digest = hashlib.sha256(body).hexdigest()
    at = body.rfind(_MODE_MEMBER)
    return digest, b"".join((body[:at], _HASH_MEMBER, digest.encode("ascii"), b'"', body[at:], b"\n"))


def fast_link(raw: bytes, lineno: int, prev: str) -> tuple[str, bool] | None:
    """``(hash, is_checkpoint)`` of a canonical line linking to ``prev``, checked on its bytes
    (None: the full check, which names the fault). With sorted keys the record's ``hash`` is
    the line's last ``,"hash":"`` (quotes in strings are escaped) and cutting it out leaves
    exactly the JSON it covers: a line passing this is byte for byte what its hash commits to."""
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


def last_line(log: BinaryIO, size: int) -> bytes:
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


def scan_lines(raw_lines: Iterable[bytes], anchor: Anchor | None) -> Scan:
    """One pass: chain every line, stop at the first fault, note the last checkpoint."""
    scan, prev, offset, last_checkpoint_raw = Scan(), GENESIS, 0, b""
    anchor_seq = anchor.seq if anchor is not None else -1
    for lineno, raw in enumerate(raw_lines, start=1):
        fast = fast_link(raw, lineno, prev)
        if fast is not None:
            prev, is_checkpoint = fast
        else:
            try:
                record = parse_line(raw, lineno)
                check_record(record, lineno, prev)
            except ChainBreak as broken:
                scan.fault, scan.fault_is_torn_end = broken, not raw.endswith(b"\n")
                break
            prev, is_checkpoint = record["hash"], record["event"] == CHECKPOINT
        scan.lines, offset = lineno, offset + len(raw)
        if lineno - 1 == anchor_seq:
            scan.anchor_hash = prev
        if is_checkpoint:
            last_checkpoint_raw, scan.checkpoint_line, scan.signed_size = raw, lineno, offset
            scan.checkpoints += 1
    if last_checkpoint_raw:
        try:
            scan.checkpoint = parse_line(last_checkpoint_raw, scan.checkpoint_line)
            check_record(scan.checkpoint, scan.checkpoint_line, scan.checkpoint["prev"])  # its shape
        except ChainBreak as broken:
            scan.checkpoint, scan.fault = None, broken
    return scan


def first_problem(
    scan: Scan, anchor: Anchor | None, key: Ed25519PublicKey | None, *, home: Path, tail_ok: bool = False
) -> ChainBreak | None:
    """The earliest fault: a broken line, a home checkpoint the log does not hold, an
    unsigned tail (unless ``tail_ok``; a break after the last checkpoint is the fault to name
    unless it is only a write cut off at the end), a last checkpoint whose signature fails."""
    unsigned = not tail_ok and scan.lines > scan.checkpoint_line and (scan.fault is None or scan.fault_is_torn_end)
    why = "not covered by a signed checkpoint (appended outside snodo, or an append was cut off)"
    problems = [
        None if tail_ok else scan.fault,
        _anchor_problem(scan, anchor, home),
        ChainBreak(scan.checkpoint_line + 1, why) if unsigned else None,
        _signature_problem(scan, key),
    ]
    return min((p for p in problems if p is not None), key=lambda p: p.line or 0, default=None)


def _anchor_problem(scan: Scan, anchor: Anchor | None, home: Path) -> ChainBreak | None:
    if anchor is None:
        return None
    where = anchor.seq + 1
    if scan.anchor_hash is None:
        return ChainBreak(
            min(scan.lines + 1, where),
            f"the log has {scan.lines} intact lines but {home} recorded a signed checkpoint at "
            f"line {where}: lines were removed (truncated, deleted, or rolled back to an older copy)",
        )
    if scan.anchor_hash != anchor.hash:
        return ChainBreak(
            where,
            f"line {where} is not the signed checkpoint {home} recorded there: the log was "
            "rewritten or replaced by another copy",
        )
    return None


# ------------------------------------------------------------------ the home's checkpoint


@functools.lru_cache(maxsize=64)  # asked three times per append
def slots(path: Path) -> tuple[Path, Path]:
    """The two files of the home's checkpoint ``path`` (the first is ``path`` itself)."""
    return path, path.with_name(path.name + ".2")


def _checksum(body: Mapping[str, Any]) -> str:
    return hashlib.sha256(canonical_json({k: v for k, v in body.items() if k != "sum"})).hexdigest()


def _read_slot(path: Path) -> dict[str, Any] | ChainBreak | None:
    try:
        raw = json.loads(path.read_bytes().decode("utf-8"))
    except FileNotFoundError:
        return None
    except (OSError, UnicodeDecodeError, ValueError) as exc:
        return ChainBreak(None, f"the checkpoint recorded in the home is unreadable: {path}: {exc}")
    if (
        not isinstance(raw, dict)
        or type(raw.get("seq")) is not int
        or type(raw.get("size")) is not int
        or not isinstance(raw.get("hash"), str)
        or ("sum" in raw and raw["sum"] != _checksum(raw))
    ):
        return ChainBreak(None, f"the checkpoint recorded in the home ({path}) is not valid")
    return raw


def _number(slot: dict[str, Any]) -> int:
    """A slot's write number (-1: none, an older snodo's)."""
    number = slot.get("write")
    return number if type(number) is int else -1


def _newest(path: Path) -> tuple[int, dict[str, Any]] | None:
    """The newest intact slot and its record; a slot cut off by a crash is passed over while
    the other is intact. Raises :class:`ChainBreak` when no slot is intact but one exists."""
    found = [_read_slot(p) for p in slots(path)]
    intact = [(i, r) for i, r in enumerate(found) if isinstance(r, dict)]
    if intact:
        return max(intact, key=lambda pair: _number(pair[1]))
    broken = [r for r in found if isinstance(r, ChainBreak)]
    if broken:
        raise broken[0]
    return None


def read_anchor(path: Path) -> Anchor | None:
    found = _newest(path)
    if found is None:
        return None
    slot, raw = found
    file = raw.get("file")
    identity = None
    if isinstance(file, list) and len(file) == 4 and all(type(n) is int for n in file):
        identity = (file[0], file[1], file[2], file[3])
    return Anchor(
        seq=raw["seq"], hash=raw["hash"], size=raw["size"], file=identity, slot=slot, write=_number(raw), record=raw
    )


def file_identity(st: os.stat_result) -> tuple[int, int, int, int]:
    """Device, inode, mtime and ctime: a log that still has those recorded after the last
    append was not written since (any write sets the ctime, which no process can set back)."""
    return (st.st_dev, st.st_ino, st.st_mtime_ns, st.st_ctime_ns)


def slot_identities(path: Path) -> tuple[tuple[int, ...] | None, ...]:
    """The identity and size of each slot file of ``path`` (``None``: absent)."""
    found: list[tuple[int, ...] | None] = []
    for slot in slots(path):
        try:
            st = os.stat(slot)
        except OSError:
            found.append(None)
        else:
            found.append((*file_identity(st), st.st_size))
    return tuple(found)


def write_anchor(
    path: Path, log_real: str, checkpoint: Mapping[str, Any], file: os.stat_result, previous: Anchor | None
) -> Anchor:
    """Record the checkpoint and ``file`` (the log as this append left it), in place, in the
    slot ``previous`` is not in. Not fsynced: a checkpoint lost in a crash only leaves the home behind."""
    target, number = (1 - previous.slot, previous.write + 1) if previous is not None else (0, 0)
    identity = file_identity(file)
    body: dict[str, Any] = {
        "log": log_real,
        "seq": checkpoint["seq"],
        "hash": checkpoint["hash"],
        "size": file.st_size,
        "ts": checkpoint["ts"],
        "key": checkpoint["data"]["key"],
        "signature": checkpoint["data"]["signature"],
        "write": number,
        "file": list(identity),
    }
    body["sum"] = _checksum(body)
    data = canonical_json(body)
    where = slots(path)[target]
    try:
        if previous is None:
            path.parent.mkdir(mode=0o700, exist_ok=True)
        fd = os.open(where, os.O_WRONLY | os.O_CREAT | os.O_CLOEXEC | os.O_NOFOLLOW, 0o600)
        try:
            offset = 0
            while offset < len(data):
                offset += os.pwrite(fd, data[offset:], offset)
            os.ftruncate(fd, len(data))
        finally:
            os.close(fd)
    except OSError as exc:
        raise StateError(f"cannot record the audit checkpoint in {where}: {exc.strerror or exc}") from exc
    return Anchor(seq=body["seq"], hash=body["hash"], size=file.st_size, file=identity, slot=target, write=number)
