"""A pids cgroup per confined run, where the machine lets snodo make one (root, cgroup v1
``pids`` hierarchy): the process-count limit root is otherwise exempt from (the kernel never
applies ``RLIMIT_NPROC`` to uid 0), and a tree kill that nothing escapes.

The child must be in the group before it can fork. Rather than a ``preexec_fn`` (slow fork
path) or a wrapper program, the spawning *thread* joins the group (cgroup v1 moves single
threads), starts the child, which inherits it, and goes back: two small writes.
"""

from __future__ import annotations

import contextlib
import functools
import os
import secrets
import signal
import threading
from collections.abc import Iterator
from pathlib import Path

PIDS = Path("/sys/fs/cgroup/pids")


@functools.cache
def available() -> bool:
    """Whether per-run pids groups can be made here (probed once per process)."""
    if os.getuid() != 0 or not (PIDS / "tasks").is_file():
        return False
    try:
        probe = PidGroup(1)
    except OSError:
        return False
    probe.remove()
    return True


class PidGroup:
    def __init__(self, max_pids: int) -> None:
        self.path = PIDS / f"snodo-{os.getpid()}-{secrets.token_hex(4)}"
        self.path.mkdir(mode=0o755)
        if max_pids > 0:
            (self.path / "pids.max").write_text(str(max_pids))

    @contextlib.contextmanager
    def spawning(self) -> Iterator[None]:
        """The calling thread is in the group for the block (children it starts stay)."""
        tid = str(threading.get_native_id())
        (self.path / "tasks").write_text(tid)
        try:
            yield
        finally:
            (PIDS / "tasks").write_text(tid)

    def kill(self) -> int:
        """SIGKILL every process in the group; repeated while new ones appear (a fork racing
        the sweep), never waiting for the signalled ones to finish dying."""
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
        return len(signalled)

    def remove(self) -> None:
        """Remove the group; while killed processes are still leaving it, a background
        thread retries (nothing waits for it)."""
        try:
            self.path.rmdir()
        except FileNotFoundError:
            return
        except OSError:
            threading.Thread(target=self._remove_later, daemon=True).start()

    def _remove_later(self) -> None:
        for _ in range(1000):
            threading.Event().wait(0.01)
            try:
                self.path.rmdir()
                return
            except FileNotFoundError:
                return
            except OSError:
                continue


def pid_group(max_pids: int) -> PidGroup | None:
    """A fresh group for one run, or ``None`` where none can be made."""
    if not available():
        return None
    try:
        return PidGroup(max_pids)
    except OSError:
        return None
