"""snodo's keyed caches under ``$SNODO_HOME/cache``: answers kept under a key made of
exactly what fixes them, so a repeat run need not compute them again.

Used for what git answered about the user's repository (its configuration's drivers,
:func:`snodo.git.runner.pin`; the protocol's history, :func:`snodo.protocol.committed.resolve`)
and for the parsed protocol document (:func:`snodo.protocol.loader.parse_protocol`).

The caches are snodo's own state, beside the home's keys where no agent can write: still,
an entry is only a hint. Its name is a SHA-256 the caller computed (never a path the
repository chose), it is read with a size bound, and anything unexpected in it (bad JSON,
another key, too large) counts as absent: the caller computes the answer again.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

#: The largest answer kept; a larger one is computed again every time.
MAX_ENTRY = 1 << 20
#: Entries kept per directory by default; the oldest go first.
MAX_ENTRIES = 256


def read_entry(cache_dir: Path | None, key: str) -> str | None:
    """The text kept under ``key``, or ``None`` (none, unreadable, corrupt, oversized)."""
    if cache_dir is None:
        return None
    try:
        with open(cache_dir / f"{key}.json", encoding="utf-8") as f:
            raw = f.read(MAX_ENTRY * 2 + 256)
        entry = json.loads(raw)
    except (OSError, ValueError, RecursionError):
        return None
    if not isinstance(entry, dict) or entry.get("key") != key or not isinstance(entry.get("text"), str):
        return None
    text: str = entry["text"]
    return text if len(text) <= MAX_ENTRY else None


def write_entry(cache_dir: Path | None, key: str, text: str, *, keep: int = MAX_ENTRIES) -> None:
    """Keep ``text`` under ``key`` (atomically), and the ``keep`` newest entries of the
    directory; a failure only costs the next run the work again."""
    if cache_dir is None or len(text) > MAX_ENTRY:
        return
    try:
        cache_dir.mkdir(mode=0o700, parents=True, exist_ok=True)
        temp = cache_dir / f".{key}.{os.getpid()}.tmp"
        with open(temp, "w", encoding="utf-8") as f:
            f.write(json.dumps({"key": key, "text": text}))
        os.replace(temp, cache_dir / f"{key}.json")
        entries = list(os.scandir(cache_dir))
        if len(entries) > keep:
            entries.sort(key=lambda e: e.stat().st_mtime_ns)
            for old in entries[: len(entries) - keep]:
                Path(old.path).unlink(missing_ok=True)
    except (OSError, ValueError):
        return
