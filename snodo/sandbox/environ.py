"""The environment of a confined process is an allowlist (SPEC §9): an inherited variable passes
only when every program needs it or ``execution.env`` / ``pass_env`` names it; one the caller
*sets* passes. ``HOME`` and ``TMPDIR`` are a private directory per run."""

from __future__ import annotations

import contextlib
import os
import re
import shutil
import stat
import tempfile
from collections.abc import Iterable, Mapping
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

#: Inherited names every program may see.
ALWAYS = frozenset(
    {"PATH", "LANG", "LANGUAGE", "TERM", "TZ", "COLORTERM", "NO_COLOR", "FORCE_COLOR", "PWD", "USER", "LOGNAME"}
)
#: Never inherited unless named (checked even for names the allowlist would admit).
_SECRET = re.compile(r"^(SSH_AUTH_SOCK|SSH_AGENT_PID|TMUX|TMUX_PANE|DBUS_.*|.*_KEY|.*_TOKEN|.*SECRET.*)$")


def _allowed(name: str) -> bool:
    return (name in ALWAYS or name.startswith("LC_")) and not _SECRET.match(name.upper())


def confined_environment(given: Mapping[str, str], *, named: Iterable[str], tmpdir: Path) -> dict[str, str]:
    """The confined child's environment from ``given``: what is allowlisted, named, or set by the caller."""
    parent = os.environ.copy()  # one decode of each, not two per name
    names = set(named)
    out = {key: value for key, value in given.items() if key in names or _allowed(key) or parent.get(key) != value}
    out.update(HOME=str(tmpdir), TMPDIR=str(tmpdir), TMP=str(tmpdir), TEMP=str(tmpdir))
    return out


def _parent() -> Path | None:
    """Our directory below the system temporary one for the runs' ``TMPDIR`` (so that one
    changes less often: Landlock caches its layout until it does); ``None`` if not safely ours."""
    parent = Path(tempfile.gettempdir()) / f"snodo-sandbox-{os.getuid()}"
    try:
        with contextlib.suppress(FileExistsError):
            parent.mkdir(mode=0o700)
        info = os.lstat(parent)
    except OSError:
        return None
    if not stat.S_ISDIR(info.st_mode) or info.st_uid != os.getuid() or info.st_mode & 0o077:
        return None
    return parent


def make_private_dir() -> Path:
    return Path(tempfile.mkdtemp(prefix="run-", dir=_parent()))


def _remove(path: Path) -> None:
    try:
        os.rmdir(path)  # the usual case: the run left nothing there
    except OSError:
        shutil.rmtree(path, ignore_errors=True)


#: Removes the private directories of finished runs off the caller's way (slow on a busy disk).
_REMOVER = ThreadPoolExecutor(max_workers=1, thread_name_prefix="snodo-tmpdirs")


def discard_private_dir(path: Path) -> None:
    """Remove ``path`` soon (the run that used it is over)."""
    try:
        _REMOVER.submit(_remove, path)
    except RuntimeError:  # the interpreter is shutting down
        _remove(path)
