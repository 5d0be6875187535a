"""Where snodo keeps the user's state, ``$SNODO_HOME`` (sessions, tokens, keys: created
0700), and a project's ``.snodo/``."""

from __future__ import annotations

import os
from pathlib import Path

from snodo.base.errors import StateError


def _made(path: Path, mode: int = 0o700) -> Path:
    try:
        path.mkdir(mode=mode, parents=True, exist_ok=True)
    except OSError as exc:
        raise StateError(f"cannot create {path}: {exc.strerror or exc}") from exc
    return path


def snodo_home() -> Path:
    """``$SNODO_HOME`` if set and non-empty, else ``~/.snodo``; created 0700 if absent."""
    configured = os.environ.get("SNODO_HOME", "")
    home = Path(configured).expanduser() if configured else Path.home() / ".snodo"
    return _made(home.absolute())


def sessions_dir(home: Path) -> Path:
    return _made(home / "sessions")


def keys_dir(home: Path) -> Path:
    return _made(home / "keys")


def tokens_db_path(home: Path) -> Path:
    return _made(home) / "tokens.db"


def project_state_dir(project: Path) -> Path:
    return _made(Path(project) / ".snodo", 0o777)
