"""snodo's keyed caches under ``$SNODO_HOME/cache``: answers kept under a key made of exactly what
fixes them. Out of agents' reach, an entry is still only a hint: named by a SHA-256 the caller
computed (never a path the repository chose), read with a size bound, absent if anything is unexpected.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from pathlib import Path

#: The largest answer kept; a larger one is computed again every time.
MAX_ENTRY = 1 << 20
#: Entries kept per directory; the oldest go first.
MAX_ENTRIES = 256


def cached(cache_dir: Path | None, key: str | None, compute: Callable[[], str | None]) -> str | None:
    """The text kept under ``key``, else ``compute()``'s, kept for the next ask unless ``None``
    (``key`` or ``cache_dir`` ``None``: nothing is kept)."""
    if cache_dir is None or key is None:
        return compute()
    kept = read_entry(cache_dir, key)
    if kept is None and (kept := compute()) is not None:
        write_entry(cache_dir, key, kept)
    return kept


def read_entry(cache_dir: Path, key: str) -> str | None:
    """The text kept under ``key``, or ``None`` (none, unreadable, corrupt, oversized)."""
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


def write_entry(cache_dir: Path, key: str, text: str) -> None:
    """Keep ``text`` under ``key`` (atomically), and the :data:`MAX_ENTRIES` newest entries of
    the directory; a failure only costs the next run the work again."""
    if len(text) > MAX_ENTRY:
        return
    try:
        cache_dir.mkdir(mode=0o700, parents=True, exist_ok=True)
        temp = cache_dir / f".{key}.{os.getpid()}.tmp"
        with open(temp, "w", encoding="utf-8") as f:
            f.write(json.dumps({"key": key, "text": text}))
        os.replace(temp, cache_dir / f"{key}.json")
        entries = list(os.scandir(cache_dir))
        if len(entries) > MAX_ENTRIES:
            entries.sort(key=lambda e: e.stat().st_mtime_ns)
            for old in entries[: len(entries) - MAX_ENTRIES]:
                Path(old.path).unlink(missing_ok=True)
    except (OSError, ValueError):
        return
