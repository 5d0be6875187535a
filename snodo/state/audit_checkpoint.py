"""The home's record of a log's last signed checkpoint (``$SNODO_HOME/audit/<key>.json``).

A log can be recomputed by whoever can write it, and a copy of an older signed log still
verifies; the home, out of reach of confined processes, remembers where the log's signed
head was, so truncation, deletion and rollback are seen. Kept apart from
:mod:`snodo.state.audit` so the one file that decides "lines were removed" reads alone.
"""

from __future__ import annotations

import contextlib
import os
import tempfile
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from snodo.errors import StateError
from snodo.state.atomic import canonical_json, read_json
from snodo.state.audit_chain import Anchor, ChainBreak


def read_anchor(path: Path) -> Anchor | None:
    try:
        raw = read_json(path)
    except FileNotFoundError:
        return None
    except StateError as exc:
        raise ChainBreak(None, f"the checkpoint recorded in the home is unreadable: {exc.message}") from None
    if (
        not isinstance(raw, dict)
        or type(raw.get("seq")) is not int
        or type(raw.get("size")) is not int
        or not isinstance(raw.get("hash"), str)
    ):
        raise ChainBreak(None, f"the checkpoint recorded in the home ({path}) is not valid")
    return Anchor(seq=raw["seq"], hash=raw["hash"], size=raw["size"])


def write_anchor(path: Path, log_path: Path, checkpoint: Mapping[str, Any], size: int) -> None:
    """Replace the home's checkpoint. Not fsynced: the log was, and a checkpoint lost in a
    crash only leaves the home one append behind, which is never a false alarm."""
    body = {
        "log": os.path.realpath(log_path),
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
