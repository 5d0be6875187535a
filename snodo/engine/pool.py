"""Working copies reused across runs: one per concurrent run of a project, never shared.

Creating a git worktree costs as much as checking out the whole repository (25 s of kernel
time on a 30,000-file repository); resetting an existing one to another commit costs what
differs between the two commits. So each project keeps a small pool under
``$SNODO_HOME/worktrees/<project-key>/``:

- ``pool/slot-<n>/`` — a detached working copy, used by one run at a time;
- ``pool.locks/slot-<n>.lock`` — held (``flock``) by the run using the copy; it records the
  run (task, run id, base) while the run lives and the copy's git directory always. The
  kernel frees it when the run's process dies, however it dies, so a copy whose lock is free
  but still names a run belonged to a run that was killed: its commits are judged and kept
  (or discarded) by :func:`snodo.engine.worktree.reclaim_abandoned` before the copy is
  reused. The locks live beside the pool, not in it, so a run never sees them change.

A run takes the first free slot (as many slots exist as runs go at once, which
``execution.max_parallel_jobs`` bounds for background jobs). Before the run the copy is
*restored* (:func:`restore`) to the run's base commit and checked clean; a copy that cannot
be restored exactly is thrown away and a fresh one made — a run never starts on a dirty copy.
Nothing of a run stays visible to the next: its commits live under refs (a branch, or
``refs/snodo/halted/…``), and the copy's own reflog and ``ORIG_HEAD`` are deleted.
Copies unused for :data:`IDLE_TTL` are dropped by the next run, ``snodo jobs prune`` and
``snodo session close``.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import secrets
import shutil
import stat
import threading
from collections.abc import Callable
from datetime import timedelta
from pathlib import Path
from typing import Any, Generic, TypeVar

from snodo.gitrun import run_git
from snodo.workspace.gitmeta import remember_walk

T = TypeVar("T")


class Beside(Generic[T]):
    """One call run in a thread beside the caller's work: ``result()`` waits for it and
    returns its value or raises its exception; leaving the ``with`` block waits for it too.

    What ``ThreadPoolExecutor(max_workers=1)`` gave here, without importing
    ``concurrent.futures`` (and ``logging`` with it: ~10 ms of every run, #26).
    """

    def __init__(self, func: Callable[..., T], *args: Any, **kwargs: Any) -> None:
        self._value: list[T] = []
        self._error: list[BaseException] = []

        def call() -> None:
            try:
                self._value.append(func(*args, **kwargs))
            except BaseException as exc:  # handed to the thread that asks for the result
                self._error.append(exc)

        self._thread = threading.Thread(target=call, name="snodo-beside")
        self._thread.start()

    def result(self) -> T:
        self._thread.join()
        if self._error:
            raise self._error[0]
        return self._value[0]

    def __enter__(self) -> Beside[T]:
        return self

    def __exit__(self, *_exc: object) -> None:
        self._thread.join()


POOL = "pool"
LOCKS = "pool.locks"
#: Copies being deleted are renamed here first, so they leave the pool in one step.
TRASH = "trash"
#: A copy no run has used for this long is dropped.
IDLE_TTL = timedelta(days=3)
#: Files of a copy's private git directory that would show the previous run's commits.
_HISTORY = ("logs/HEAD", "ORIG_HEAD", "AUTO_MERGE", "FETCH_HEAD", "MERGE_HEAD", "CHERRY_PICK_HEAD", "REVERT_HEAD")


class Slot:
    """One locked slot of the pool: its copy, its lock and what the lock file records."""

    def __init__(self, base_dir: Path, n: int, fd: int) -> None:
        self.n = n
        self.path = base_dir / POOL / f"slot-{n}"
        self.lock_path = base_dir / LOCKS / f"slot-{n}.lock"
        self.fd = fd

    def meta(self) -> dict[str, Any]:
        try:
            data = json.loads(os.pread(self.fd, 1 << 16, 0).decode() or "{}")
        except (OSError, ValueError, UnicodeDecodeError):
            return {}
        return data if isinstance(data, dict) else {}

    def write_meta(self, meta: dict[str, Any]) -> None:
        data = json.dumps(meta).encode()
        os.ftruncate(self.fd, 0)
        os.pwrite(self.fd, data, 0)

    def release(self, *, keep: dict[str, Any] | None = None) -> None:
        """Forget the run (keeping the copy's git directory on record) and free the lock."""
        if self.fd < 0:
            return
        with contextlib.suppress(OSError):
            gitdir = self.meta().get("gitdir")
            self.write_meta({**({"gitdir": gitdir} if gitdir else {}), **(keep or {})})
        os.close(self.fd)
        self.fd = -1


def lock_slot(base_dir: Path, n: int) -> Slot | None:
    """Slot ``n`` locked by this process, or ``None`` when another process holds it."""
    (base_dir / LOCKS).mkdir(parents=True, exist_ok=True)
    fd = os.open(base_dir / LOCKS / f"slot-{n}.lock", os.O_RDWR | os.O_CREAT, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        os.close(fd)
        return None
    return Slot(base_dir, n, fd)


def slot_numbers(base_dir: Path) -> list[int]:
    """The slots the pool has a lock file for, in order."""
    found = []
    for lock in (base_dir / LOCKS).glob("slot-*.lock"):
        number = lock.name.removeprefix("slot-").removesuffix(".lock")
        if number.isdigit():
            found.append(int(number))
    return sorted(found)


def take_free_slot(base_dir: Path) -> Slot:
    """The first slot no live process holds whose last run ended cleanly (a slot still
    naming a dead run waits for :func:`~snodo.engine.worktree.reclaim_abandoned`)."""
    n = 0
    while True:
        slot = lock_slot(base_dir, n)
        if slot is not None:
            if "run_id" not in slot.meta():
                return slot
            os.close(slot.fd)
        n += 1


def restore(slot: Slot, base: str | Callable[[], str]) -> bool:
    """Bring the slot's copy back to exactly ``base``: no change to a tracked file, no
    untracked or ignored file, no nested repository, every mode as a fresh checkout makes
    it, no history of earlier runs. ``False`` when that cannot be done or checked (the caller
    then makes a fresh copy).

    The usual path costs one ``status`` (with ignored files) and what differs: the leftovers
    it lists are deleted, a second ``status`` checks they are gone, then one ``checkout``
    (a two-tree merge) moves the clean copy from its HEAD to ``base`` touching only the
    files that differ. ``base`` may be a function: it is called once the copy's own
    ``status`` is in, so the caller can read it alongside. A copy with changes to tracked
    files takes the long path: ``reset --hard``, ``clean -ffdx`` (nested repositories
    too) and the same check.
    """
    gitdir = slot.meta().get("gitdir")
    if not isinstance(gitdir, str) or not os.path.isdir(gitdir) or not slot.path.is_dir():
        return False
    resolved: list[str] = [base] if isinstance(base, str) else []

    def target() -> str:  # the base, asked for (from a status running alongside) when needed
        if not resolved:
            resolved.append(base() if callable(base) else base)
        return resolved[0]

    # The copy's `.git` is what snodo wrote, or the copy is not trusted (it names the git
    # directory git works in; an agent could point it anywhere).
    try:
        with open(slot.path / ".git", encoding="utf-8") as fh:
            if fh.read() != f"gitdir: {gitdir}\n" or not os.path.isfile(slot.path / ".git"):
                return False
    except (OSError, UnicodeDecodeError):
        return False
    pinned = (f"--git-dir={gitdir}", f"--work-tree={slot.path}")
    # The mode scan (Python, an lstat per path) and git's status (a process) run side by side;
    # the listing is taken again if the scan had to repair something it could not see past.
    walked: dict[str, Any] = {}
    with Beside(repair_modes, slot.path, walked=walked) as scan:
        left = _leftovers(slot.path, pinned)
        repaired = scan.result()
    if repaired is None:
        return False
    remember_walk(slot.path, walked)  # the run's first look for new `.git` entries reads what changed
    if repaired:
        left = _leftovers(slot.path, pinned)
    for attempt in range(2):
        if left is None or any(not untracked for _, untracked in left):
            break  # changes to tracked files: the long path
        if not left:
            # A clean copy: move it to the base (HEAD, index and the files that differ) in
            # one checkout; a copy already there needs nothing.
            if detached_head(gitdir) == target() or run_git(slot.path, *pinned, *_MOVE, target()).ok:
                _forget_history(gitdir)
                return True
            break
        if attempt == 1 or not _delete(slot.path, [path for path, _ in left]):
            break
        left = _leftovers(slot.path, pinned)
    if not run_git(slot.path, *pinned, "reset", "-q", "--hard", "--no-recurse-submodules", target()).ok:
        return False
    run_git(slot.path, *pinned, "clean", "-ffdxq")
    _forget_history(gitdir)
    return _leftovers(slot.path, pinned) == []


#: Moving a clean copy to another commit: HEAD detached there, the index and the files that
#: differ updated (a two-tree merge, as ``read-tree -m -u``), no submodule entered.
_MOVE = ("checkout", "-q", "--detach", "--no-recurse-submodules")


def detached_head(gitdir: str) -> str | None:
    """The commit a copy's HEAD names, read from the git directory snodo made for it
    (``None`` when HEAD is not a detached commit id, or cannot be read)."""
    try:
        with open(os.path.join(gitdir, "HEAD"), encoding="ascii") as fh:
            text = fh.read(100).strip()
    except (OSError, UnicodeDecodeError):
        return None
    return text if len(text) in (40, 64) and all(c in "0123456789abcdef" for c in text) else None


def _leftovers(copy: Path, pinned: tuple[str, ...]) -> list[tuple[str, bool]] | None:
    """What ``status`` lists in the copy, as (path, untracked-or-ignored); ``None`` when git
    could not look everywhere (an unreadable directory) or failed."""
    check = run_git(copy, *pinned, "status", "--porcelain=v1", "-z", "--ignored", "--untracked-files=normal")
    if not check.ok or check.stderr.strip():
        return None
    found = []
    records = iter(check.stdout.split("\0"))
    for record in records:
        if not record:
            continue
        code, path = record[:2], record[3:]
        if code[0] in "RC":
            next(records, None)  # a rename's source path follows
        found.append((path, code in ("??", "!!")))
    return found


def _delete(copy: Path, paths: list[str]) -> bool:
    """Delete what ``status`` listed as untracked or ignored (a file, a link, a directory —
    a nested repository included), never following a link and never leaving the copy."""
    for rel in paths:
        parts = rel.rstrip("/").split("/")
        if not rel or rel.startswith("/") or ".." in parts or parts[0] == ".git":
            return False
        target = copy.joinpath(*parts)
        try:
            if target.is_dir() and not target.is_symlink():
                shutil.rmtree(target)
            else:
                target.unlink()
        except FileNotFoundError:
            continue
        except OSError:
            return False
    return True


def _forget_history(gitdir: str) -> None:
    for name in _HISTORY:
        with contextlib.suppress(FileNotFoundError, IsADirectoryError):
            os.unlink(os.path.join(gitdir, name))


def _umask() -> int:
    with contextlib.suppress(OSError, ValueError), open("/proc/self/status", encoding="ascii") as fh:
        for line in fh:
            if line.startswith("Umask:"):
                return int(line.split()[1], 8)
    return 0o022


def repair_modes(root: Path, *, walked: dict[str, Any] | None = None) -> int | None:
    """Give every directory and file below ``root`` the mode a fresh checkout gives it (an
    agent's ``chmod 000`` directory would stop ``git clean``; a read-only file would stay
    read-only, as git tracks only the executable bit) and delete what git cannot see
    (sockets, fifos, devices: never tracked, never listed as untracked). Returns how many
    paths were repaired, ``None`` for one that cannot be: a mount point, a mode that will
    not change, an unreadable directory.

    This is the one step that looks at every path of the copy (an ``lstat`` each, no read):
    git records no mode but the executable bit, so no index can say which changed. What it
    saw of each directory (its ``lstat`` key and entries) goes into ``walked``.
    """
    mask = _umask()
    dir_mode, file_mode, exec_mode = 0o777 & ~mask, 0o666 & ~mask, 0o777 & ~mask
    try:
        top = os.lstat(root)
    except OSError:
        return None
    device = top.st_dev
    pending = [(str(root), top)]
    repaired = 0
    while pending:
        directory, dir_st = pending.pop()
        try:
            with os.scandir(directory) as it:
                entries = list(it)
        except OSError:
            return None
        if walked is not None:
            walked[directory] = ((dir_st.st_ino, dir_st.st_mtime_ns, dir_st.st_ctime_ns), entries)
        for entry in entries:
            if directory == str(root) and entry.name == ".git":
                continue
            try:
                st = entry.stat(follow_symlinks=False)
            except OSError:
                return None
            if st.st_dev != device:
                return None
            mode = stat.S_IMODE(st.st_mode)
            if stat.S_ISDIR(st.st_mode):
                want = dir_mode
                pending.append((entry.path, st))
            elif stat.S_ISREG(st.st_mode):
                want = exec_mode if mode & 0o100 else file_mode
            elif stat.S_ISLNK(st.st_mode):
                continue  # a link carries no mode of its own
            else:
                try:
                    os.unlink(entry.path)
                    repaired += 1
                    continue
                except OSError:
                    return None
            if mode != want:
                try:
                    os.chmod(entry.path, want)
                    repaired += 1
                except OSError:
                    return None
    return repaired


def trash(base_dir: Path, path: Path) -> None:
    """Delete a copy: renamed out of the pool in one step, then removed whatever its modes."""
    if not os.path.lexists(path):
        return
    bin_dir = base_dir / TRASH
    bin_dir.mkdir(parents=True, exist_ok=True)
    target = bin_dir / f"{path.name}-{secrets.token_hex(4)}"
    try:
        os.replace(path, target)
    except OSError:
        target = path
    repair_modes(target)
    shutil.rmtree(target, ignore_errors=True)


def drop_idle(repo: Path, base_dir: Path, *, older_than: timedelta = IDLE_TTL) -> list[str]:
    """Remove the copies no run holds that were last used longer than ``older_than`` ago
    (by the lock file's change time). Returns the slots dropped."""
    import time

    dropped = []
    cutoff = time.time() - older_than.total_seconds()
    for n in slot_numbers(base_dir):
        slot = lock_slot(base_dir, n)
        if slot is None:
            continue
        try:
            if "run_id" in slot.meta() or os.fstat(slot.fd).st_mtime > cutoff:
                continue
            if slot.path.exists():
                trash(base_dir, slot.path)
                dropped.append(slot.path.name)
            slot.write_meta({})
        finally:
            slot.release()
    if dropped:
        run_git(repo, "worktree", "prune")
    with contextlib.suppress(OSError):
        leftovers = list((base_dir / TRASH).iterdir())
        for left in leftovers:  # a deletion an earlier process did not finish
            repair_modes(left)
            shutil.rmtree(left, ignore_errors=True)
    return dropped
