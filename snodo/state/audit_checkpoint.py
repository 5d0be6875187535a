"""The home's record of a log's last signed checkpoint (``$SNODO_HOME/audit/<key>.json``).

A log can be recomputed by whoever can write it, and a copy of an older signed log still
verifies; the home, out of reach of confined processes, remembers where the log's signed
head was, so truncation, deletion and rollback are seen. Kept apart from
:mod:`snodo.state.audit` so the one file that decides "lines were removed" reads alone.

Two slots, ``<key>.json`` and ``<key>.json.2``, each overwritten in place in turn (the
older one next), each with a running write number and a checksum of its content: the
newest intact slot is the record. Replacing a file by renaming a new one over it costs a
whole flush on ext4 (``auto_da_alloc``), as much as the log's own fsync; an
in-place write costs nothing until the kernel writes it back, and a write cut off by a
crash leaves the other slot, one append behind, which is never a false alarm. A slot
without a write number or checksum is one written by an older snodo, read as before.
Every read and write happens under the log's lock.
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


def newest(path: Path) -> dict[str, Any] | None:
    """The newest intact slot's record; a slot cut off by a crash is passed over while the
    other is intact. Raises :class:`ChainBreak` when no slot is intact but one exists."""
    found = [_read_slot(p) for p in slots(path)]
    intact = [r for r in found if isinstance(r, dict)]
    if intact:
        return max(intact, key=lambda r: r.get("write", -1) if type(r.get("write")) is int else -1)
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
    """What :attr:`Anchor.file` compares: a log whose device, inode, mtime and ctime are
    those recorded after the last append was not written since (any write sets the ctime,
    and no process can set it back)."""
    return (st.st_dev, st.st_ino, st.st_mtime_ns, st.st_ctime_ns)


def write_anchor(
    path: Path,
    log_real: str,
    checkpoint: Mapping[str, Any],
    size: int,
    file: os.stat_result | None = None,
    *,
    last: tuple[int, int] | None = None,
) -> tuple[int, int]:
    """Record the checkpoint (and ``file``, the log as this append left it) in the older (or
    broken, or missing) slot, in place; the slot written and its write number. ``log_real``
    is the log's real path. ``last`` is the slot and write number of the newest slot when
    the caller knows them (its own previous write, the slots unchanged since): nothing is
    read then. Not fsynced: the log was, and a checkpoint lost in a crash only leaves the
    home behind, which is never a false alarm."""
    if last is not None:
        target, number = 1 - last[0], last[1] + 1
    else:
        found = [_read_slot(p) for p in slots(path)]
        numbers = [r.get("write", -1) if isinstance(r, dict) and type(r.get("write")) is int else -1 for r in found]
        current = max(range(2), key=lambda i: (isinstance(found[i], dict), numbers[i]))
        if not isinstance(found[current], dict):  # nothing intact yet: the first slot
            current, target = -1, 0
        else:
            target = 1 - current
        number = (numbers[current] if current >= 0 else -1) + 1
    body: dict[str, Any] = {
        "log": log_real,
        "seq": checkpoint["seq"],
        "hash": checkpoint["hash"],
        "size": size,
        "ts": checkpoint["ts"],
        "key": checkpoint["data"]["key"],
        "signature": checkpoint["data"]["signature"],
        "write": number,
    }
    if file is not None:
        body["file"] = list(file_identity(file))
    body["sum"] = _checksum(body)
    data = canonical_json(body)
    where = slots(path)[target]
    try:
        if last is None:  # else the slots were found where they were written
            path.parent.mkdir(mode=0o700, exist_ok=True)
        fd = os.open(where, os.O_WRONLY | os.O_CREAT | os.O_CLOEXEC | os.O_NOFOLLOW, 0o600)
        try:
            view = memoryview(data)
            offset = 0
            while offset < len(data):
                offset += os.pwrite(fd, view[offset:], offset)
            os.ftruncate(fd, len(data))
        finally:
            os.close(fd)
    except OSError as exc:
        raise StateError(f"cannot record the audit checkpoint in {where}: {exc.strerror or exc}") from exc
    return target, number
