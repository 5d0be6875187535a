"""The home's record of a log's last signed checkpoint (``$SNODO_HOME/audit/<key>.json``),
out of reach of confined processes, so truncation, deletion and rollback of the log show.

Two slots, ``<key>.json`` and ``<key>.json.2``, overwritten in place in turn, each with a
write number and a checksum: the newest intact slot is the record. A rename per append
would cost a whole flush on ext4 (``auto_da_alloc``); a write cut off by a crash leaves the
other slot, one append behind, which is never a false alarm. A slot without number or
checksum is an older snodo's, read as before. Every read and write is under the log's lock.
"""

from __future__ import annotations

import functools
import hashlib
import json
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from snodo.base.errors import StateError
from snodo.state.atomic import canonical_json
from snodo.state.audit_chain import Anchor, ChainBreak


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


def _number(slot: dict[str, Any] | ChainBreak | None) -> int:
    """A slot's write number; -1 for a slot that is not intact or has none."""
    number = slot.get("write") if isinstance(slot, dict) else None
    return number if type(number) is int else -1


def newest(path: Path) -> dict[str, Any] | None:
    """The newest intact slot's record; a slot cut off by a crash is passed over while the
    other is intact. Raises :class:`ChainBreak` when no slot is intact but one exists."""
    found = [_read_slot(p) for p in slots(path)]
    intact = [r for r in found if isinstance(r, dict)]
    if intact:
        return max(intact, key=_number)
    broken = [r for r in found if isinstance(r, ChainBreak)]
    if broken:
        raise broken[0]
    return None


def read_anchor(path: Path) -> Anchor | None:
    raw = newest(path)
    if raw is None:
        return None
    file = raw.get("file")
    identity = None
    if isinstance(file, list) and len(file) == 4 and all(type(n) is int for n in file):
        identity = (file[0], file[1], file[2], file[3])
    return Anchor(seq=raw["seq"], hash=raw["hash"], size=raw["size"], file=identity)


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


def _next_slot(path: Path) -> tuple[int, int]:
    """The slot to write (the older, broken or missing one) and its write number."""
    found = [_read_slot(p) for p in slots(path)]
    current = max(range(2), key=lambda i: (isinstance(found[i], dict), _number(found[i])))
    if not isinstance(found[current], dict):  # nothing intact yet: the first slot
        return 0, 0
    return 1 - current, _number(found[current]) + 1


def write_anchor(
    path: Path, log_real: str, checkpoint: Mapping[str, Any], file: os.stat_result, *, last: tuple[int, int] | None
) -> tuple[int, int]:
    """Record the checkpoint and ``file`` (the log, at ``log_real``, as this append left it)
    in the older slot, in place; returns the slot written and its write number. ``last``:
    the slot and number this process wrote last, when the slots are unchanged since (then
    nothing is read). Not fsynced: a checkpoint lost in a crash only leaves the home behind."""
    target, number = (1 - last[0], last[1] + 1) if last is not None else _next_slot(path)
    body: dict[str, Any] = {
        "log": log_real,
        "seq": checkpoint["seq"],
        "hash": checkpoint["hash"],
        "size": file.st_size,
        "ts": checkpoint["ts"],
        "key": checkpoint["data"]["key"],
        "signature": checkpoint["data"]["signature"],
        "write": number,
        "file": list(file_identity(file)),
    }
    body["sum"] = _checksum(body)
    data = canonical_json(body)
    where = slots(path)[target]
    try:
        if last is None:  # else the slots were found where they were written
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
    return target, number
