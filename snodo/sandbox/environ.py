"""The environment of a confined process is an allowlist (SPEC §9), like Codex's shell
environment policy: an inherited variable reaches confined code only when it is one of the
few every program needs, or a name the protocol (``execution.env``) or the plugin starting
the process (``pass_env``) asked for.

What is refused by default is exactly what an attacker wants: the user's ssh-agent
(``SSH_AUTH_SOCK``), tmux server (``TMUX``), session bus (``DBUS_*``) and every API key
or token. Those never pass unless named; naming one is the protocol author's or plugin's
explicit decision. A variable the caller *sets* (a value not inherited from snodo's own
environment, such as a coder's private ``XDG_CONFIG_HOME``) is the caller's choice and
passes as given. ``HOME`` and ``TMPDIR`` are always private to the run: a directory made
before it starts (:func:`make_private_dir`) and removed after it ended by a background
thread (:func:`discard_private_dir`), so a run's result never waits for the file system (on
a busy disk removing even an empty directory is slow); what is still queued at
exit is removed then.
"""

from __future__ import annotations

import atexit
import contextlib
import os
import queue
import re
import shutil
import stat
import tempfile
import threading
from collections.abc import Iterable, Mapping
from pathlib import Path

#: Inherited names every program may see.
ALWAYS = frozenset(
    {"PATH", "LANG", "LANGUAGE", "TERM", "TZ", "COLORTERM", "NO_COLOR", "FORCE_COLOR", "PWD", "USER", "LOGNAME"}
)
#: Never inherited unless named (checked even for names the allowlist would admit).
_SECRET = re.compile(r"^(SSH_AUTH_SOCK|SSH_AGENT_PID|TMUX|TMUX_PANE|DBUS_.*|.*_KEY|.*_TOKEN|.*SECRET.*)$")


def refused_by_default(name: str) -> bool:
    """Whether ``name`` names a socket or secret that is never inherited unless named."""
    return bool(_SECRET.match(name.upper()))


def _allowed(name: str) -> bool:
    return (name in ALWAYS or name.startswith("LC_")) and not refused_by_default(name)


def confined_environment(
    given: Mapping[str, str],
    *,
    named: Iterable[str],
    tmpdir: Path,
    inherited: Mapping[str, str] | None = None,
) -> dict[str, str]:
    """The environment a confined child gets from the one its caller built (``given``).

    A variable of ``given`` passes when it is allowlisted, named in ``named``, or not
    inherited (absent from, or different in, snodo's own environment ``inherited``).
    ``HOME`` is the private ``tmpdir`` itself (one directory less to make and remove).
    """
    parent = os.environ.copy() if inherited is None else inherited  # one decode of each, not two per name
    names = set(named)
    out = {key: value for key, value in given.items() if key in names or _allowed(key) or parent.get(key) != value}
    out.update(HOME=str(tmpdir), TMPDIR=str(tmpdir), TMP=str(tmpdir), TEMP=str(tmpdir))
    return out


_QUEUE: queue.SimpleQueue[Path | None] = queue.SimpleQueue()
_LOCK = threading.Lock()
_WORKER: list[threading.Thread] = []


def _parent() -> Path | None:
    """One directory of ours below the system temporary directory for every run's private
    ``TMPDIR``: the system directory itself then changes less often (the Landlock backend
    caches its layout until it does). ``None`` (use the system one) if it is not safely ours."""
    parent = Path(tempfile.gettempdir()) / f"snodo-sandbox-{os.getuid()}"
    try:
        info = os.lstat(parent)
    except FileNotFoundError:
        with contextlib.suppress(FileExistsError):
            parent.mkdir(mode=0o700)
        try:
            info = os.lstat(parent)
        except OSError:
            return None
    except OSError:
        return None
    if not stat.S_ISDIR(info.st_mode) or info.st_uid != os.getuid() or info.st_mode & 0o077:
        return None
    return parent


def make_private_dir() -> Path:
    """A fresh private directory for one run."""
    return Path(tempfile.mkdtemp(prefix="run-", dir=_parent()))


def _remove(path: Path) -> None:
    try:
        os.rmdir(path)  # the usual case: the run left nothing there
    except OSError:
        shutil.rmtree(path, ignore_errors=True)


def _work() -> None:
    while (path := _QUEUE.get()) is not None:
        _remove(path)


def discard_private_dir(path: Path) -> None:
    """Remove ``path`` soon, off the caller's way (the run that used it is over)."""
    with _LOCK:
        if not _WORKER or not _WORKER[0].is_alive():
            worker = threading.Thread(target=_work, name="snodo-tmpdirs", daemon=True)
            worker.start()
            _WORKER[:] = [worker]
    _QUEUE.put(path)


@atexit.register
def _drain() -> None:
    """At exit: stop the worker, then remove whatever it had not reached."""
    with _LOCK:
        worker = _WORKER[0] if _WORKER else None
    if worker is not None and worker.is_alive():
        _QUEUE.put(None)
        worker.join(timeout=10)
    while True:
        try:
            path = _QUEUE.get_nowait()
        except queue.Empty:
            return
        if path is not None:
            _remove(path)
