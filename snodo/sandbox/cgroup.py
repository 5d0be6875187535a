"""A pids cgroup per confined run where snodo can make one (root, cgroup v1 ``pids``): the
process-count limit the kernel never applies to root, and a tree kill nothing escapes. The
spawning *thread* joins the group (no ``preexec_fn``); groups are pooled, reused once empty."""

from __future__ import annotations

import atexit
import contextlib
import functools
import os
import secrets
import signal
import threading
from collections.abc import Iterator
from pathlib import Path

PIDS = Path("/sys/fs/cgroup/pids")
_PREFIX = "snodo-"


@functools.cache
def available() -> bool:
    if os.getuid() != 0 or not (PIDS / "tasks").is_file():
        return False
    with contextlib.suppress(OSError), os.scandir(PIDS) as entries:  # groups of snodo processes killed before exit
        for entry in entries:
            owner = entry.name.removeprefix(_PREFIX).split("-")[0]
            if entry.name.startswith(_PREFIX) and owner.isdigit() and not os.path.exists(f"/proc/{owner}"):
                with contextlib.suppress(OSError):
                    os.rmdir(entry.path)
    try:
        probe = PidGroup(1)
    except OSError:
        return False
    probe.remove()
    return True


class PidGroup:
    def __init__(self, max_pids: int) -> None:
        self.path = PIDS / f"{_PREFIX}{os.getpid()}-{secrets.token_hex(4)}"
        self.path.mkdir(mode=0o755)
        self.limit(max_pids)

    def limit(self, max_pids: int) -> None:
        (self.path / "pids.max").write_text(str(max_pids) if max_pids > 0 else "max")

    @contextlib.contextmanager
    def spawning(self) -> Iterator[None]:
        """The calling thread is in the group for the block (children it starts stay)."""
        (self.path / "tasks").write_text("0")
        try:
            yield
        finally:
            (PIDS / "tasks").write_text("0")

    def kill(self) -> None:
        """SIGKILL every process in the group, again while new ones appear (a fork racing)."""
        signalled: set[int] = set()
        for _ in range(50):
            try:
                pids = {int(p) for p in (self.path / "cgroup.procs").read_text().split()}
            except OSError:
                break
            fresh = pids - signalled
            if not fresh:
                break
            for pid in fresh:
                with contextlib.suppress(OSError):
                    os.kill(pid, signal.SIGKILL)
            signalled |= fresh

    def empty(self) -> bool:
        """No process left, not even one killed but not yet reaped (it would still count)."""
        try:
            return (self.path / "pids.current").read_text().strip() == "0"
        except OSError:
            return False

    def remove(self) -> None:
        """Remove the group; while killed processes are still leaving it, a thread retries."""
        try:
            self.path.rmdir()
        except FileNotFoundError:
            return
        except OSError:
            threading.Thread(target=self._remove_later, daemon=True).start()

    def _remove_later(self) -> None:
        for _ in range(1000):
            threading.Event().wait(0.01)
            with contextlib.suppress(OSError):
                self.path.rmdir()
            if not self.path.is_dir():
                return


_POOL_LOCK = threading.Lock()
#: Groups of finished runs whose last processes may still be dying: reused once empty.
_POOL: list[PidGroup] = []
_POOL_SIZE = 8


def pid_group(max_pids: int) -> PidGroup | None:
    """An empty group for one run (``None`` where none can be made)."""
    if not available():
        return None
    with _POOL_LOCK:
        group = next((g for g in _POOL if g.empty()), None)
        if group is not None:
            _POOL.remove(group)
    try:
        if group is None:
            return PidGroup(max_pids)
        group.limit(max_pids)
        return group
    except OSError:
        if group is not None:
            group.remove()
        return None


def release(group: PidGroup) -> None:
    """Kill what is left in ``group`` and pool it; a full pool lets go of its oldest group
    (one that never empties cannot block reuse)."""
    group.kill()
    with _POOL_LOCK:
        _POOL.append(group)
        evicted = _POOL.pop(0) if len(_POOL) > _POOL_SIZE else None
    if evicted is not None:
        evicted.remove()


@atexit.register
def _drain() -> None:
    with _POOL_LOCK:
        groups = list(_POOL)
        _POOL.clear()
    for group in groups:
        group.kill()
        with contextlib.suppress(OSError):
            group.path.rmdir()
