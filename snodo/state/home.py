"""Where snodo keeps the user's state, ``$SNODO_HOME`` (sessions, tokens, keys: created 0700)."""

from __future__ import annotations

import os
from pathlib import Path

from snodo.base.errors import StateError


def made(path: Path, mode: int = 0o700) -> Path:
    try:
        path.mkdir(mode=mode, parents=True, exist_ok=True)
    except OSError as exc:
        raise StateError(f"cannot create {path}: {exc.strerror or exc}") from exc
    return path


def snodo_home() -> Path:
    """``$SNODO_HOME`` if set and non-empty, else ``~/.snodo``; created 0700 if absent."""
    configured = os.environ.get("SNODO_HOME", "")
    home = Path(configured).expanduser() if configured else Path.home() / ".snodo"
    return made(home.absolute())


def keys_dir(home: Path) -> Path:
    return made(home / "keys")
