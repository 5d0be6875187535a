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
import time
from collections.abc import Callable
from datetime import timedelta
from pathlib import Path
from typing import Any

from snodo.engine import poolscan
from snodo.engine.poolmodes import repair_dirs, repair_files, repair_modes
from snodo.git.runner import run_git
from snodo.workspace.gitmeta import remember_dirs, remember_walk

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
        #: every directory of the copy (root-relative, "" for the root) as the last restore
        #: or checkout left it; ``None`` when not known
        self.dirs: tuple[str, ...] | None = None

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

    The usual path reads no file and costs what changed, whatever the size of the tree:

    1. :func:`~snodo.engine.poolscan.sweep` compares every directory with the record the
       last restore left (an ``lstat`` each, none per file), gives it its mode back, and in
       those that changed deletes every name the record lacks: untracked and ignored files,
       nested repositories, sockets and fifos (with no record: every directory read by
       :func:`~snodo.engine.poolmodes.repair_dirs`, and ``clean -ffdx`` after step 2);
    2. the files the last restore wrote get their mode back by name (git compares ctimes
       only to the second); after a restore that wrote nothing, only those whose inode
       changed in the second :data:`REF_INDEX` was written, or later, stay on that list;
    3. against :data:`REF_INDEX`, the index as the last restore left it — private to
       snodo, so no later ``git add`` or ``status`` refreshed it: when ``base`` is the
       commit it holds and a read-only ``diff-files`` finds no tracked file whose stat data
       changed since (its content, its mode, its inode: a ``chmod`` changes the ctime),
       HEAD is detached at ``base`` and that index becomes the copy's, nothing written;
       otherwise one ``reset --hard`` to ``base`` writes every such file again from the
       object store, with the mode a checkout gives it.

    Each must succeed without a word on stderr, or the long path runs: an ``lstat`` of every
    path (:func:`~snodo.engine.poolmodes.repair_modes`), ``reset --hard``, ``clean`` and a
    ``status`` that must list nothing. A link to a directory anywhere in the copy adds that
    ``status`` to the usual path (git follows such a link in a tracked path when it compares
    stat data). ``base`` may be a function: it is called when step 3 needs it, so the
    caller can read it alongside.
    """
    slot.dirs = None
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
    pinned = (f"--git-dir={gitdir}", f"--work-tree={slot.path}", *STAT_TRUST)
    ref = Path(gitdir) / REF_INDEX
    if not os.path.isfile(ref) or os.path.islink(ref):
        return _long_path(slot, gitdir, pinned, target())
    before = poolscan.load(gitdir)
    if before is not None:  # the usual case: what changed since the record, untracked names deleted
        swept = poolscan.sweep(slot.path, before)
        if swept is None:
            return _long_path(slot, gitdir, pinned, target())
        remember_dirs(slot.path, swept.seen)  # the run's first look for new `.git` entries reads what changed
        linked = swept.linked_dir
        real_dirs = {os.path.join(slot.path, rel) if rel else str(slot.path) for rel in swept.seen}
    else:  # a copy recorded before the record existed: every directory read, `clean` below
        walked: dict[str, Any] = {}
        seen = repair_dirs(slot.path, walked=walked)
        if seen is None:
            return False
        remember_walk(slot.path, walked)
        linked, real_dirs = seen.linked_dir, set(walked)
    racy: list[str] = []  # the names still to repair by name against `ref`
    if (
        repair_files(
            slot.path, poolscan.read_names(gitdir, RACY), real_dirs, kept=racy, racy_from=int(ref.stat().st_mtime)
        )
        is None
    ):
        return False
    checked_from = int(time.time())
    if before is not None and recorded_base(gitdir) == target() and _untouched(slot.path, pinned, ref):
        _settle(ref, checked_from)
        _set_head(gitdir, target())  # no tracked file changed: the reset would write nothing but the index
        install_index(ref, Path(gitdir) / "index")
        _forget_history(gitdir)
        if not linked or _leftovers(slot.path, pinned) == []:
            written, slot.dirs = poolscan.save(gitdir, slot.path, before, int(time.time()))
            poolscan.write_names(gitdir, RACY, sorted({*racy, *written}))
            return True
    work = ref.with_name(f"{REF_INDEX}.work")
    os.replace(ref, work)  # moved, not copied: its mtime is what git's racy-entry check reads
    started = int(time.time())
    reset = run_git(slot.path, *pinned, *_RESET, target(), env={"GIT_INDEX_FILE": str(work)})
    if reset.ok and not reset.stderr.strip():
        install_index(work, Path(gitdir) / "index")
        os.replace(work, ref)
        clean = None if before is not None else run_git(slot.path, *pinned, "clean", "-ffdxq")
        if clean is None or (clean.ok and not clean.stderr.strip()):
            _forget_history(gitdir)
            if not linked or _leftovers(slot.path, pinned) == []:
                written, slot.dirs = poolscan.save(gitdir, slot.path, before, started)
                poolscan.write_names(gitdir, RACY, written)
                _record_base(gitdir, target())
                return True
    with contextlib.suppress(FileNotFoundError):
        os.unlink(work)
    return _long_path(slot, gitdir, pinned, target())


def _untouched(copy: Path, pinned: tuple[str, ...], ref: Path) -> bool:
    """Whether every tracked file still has the stat data :data:`REF_INDEX` recorded (or, for
    an entry written in the same second as the record, the same content): one read-only
    ``diff-files`` — an ``lstat`` per file and no index written, where ``reset --hard`` also
    rewrites the whole index. Any doubt (a difference, a word on stderr) says no."""
    found = run_git(copy, *pinned, "diff-files", "--quiet", "--no-ext-diff", env={"GIT_INDEX_FILE": str(ref)})
    return found.returncode == 0 and not found.stderr.strip()


def _settle(ref: Path, checked_from: int) -> None:
    """Date :data:`REF_INDEX` to ``checked_from``, the second its ``diff-files`` started, when
    older. git reads every file changed in its index's second or later ("racily clean"): on
    a fresh copy that is every file, each run (0.25 s on 30,000). All were just found as
    recorded, ctime included (which no process sets); any later change dates its file
    ``checked_from`` or after, still unlike its entry and racy against the new date."""
    if int(ref.stat().st_mtime) < checked_from:
        os.utime(ref, (checked_from, checked_from))


def _set_head(gitdir: str, base: str) -> None:
    """Detach the copy's HEAD at ``base``: a file of its private git directory, replaced by a
    rename as git's own ref update does (no reflog is kept: see :func:`_forget_history`)."""
    tmp = os.path.join(gitdir, "HEAD.snodo-tmp")
    with open(tmp, "w", encoding="ascii") as fh:
        fh.write(f"{base}\n")
    os.replace(tmp, os.path.join(gitdir, "HEAD"))


def _long_path(slot: Slot, gitdir: str, pinned: tuple[str, ...], base: str) -> bool:
    """Restore with no recorded stat data to rely on: every path's mode repaired, then
    ``reset --hard``, ``clean -ffdx`` and a ``status`` that must list nothing; the index it
    leaves becomes the record for the next restore."""
    if repair_modes(slot.path) is None:
        return False
    started = int(time.time())
    if not run_git(slot.path, *pinned, *_RESET, base).ok:
        return False
    run_git(slot.path, *pinned, "clean", "-ffdxq")
    _forget_history(gitdir)
    if _leftovers(slot.path, pinned) != []:
        return False
    slot.dirs = record_index(gitdir, base, slot.path, started)
    return True


#: The index the last restore left, kept in the copy's git directory under a name git does
#: not know: no git command refreshes it, so its stat data is what the copy looked like then.
REF_INDEX = "snodo-restore.index"
#: The commit :data:`REF_INDEX` holds the tree of (what the engine's first commit builds on).
REF_BASE = "snodo-restore.base"
#: Stat data compared in full (ctime, inode, owner, size, executable bit) whatever the
#: repository configures, and no untracked cache, fsmonitor or split index to trust.
STAT_TRUST = tuple(
    arg
    for pair in (
        "core.trustctime=true",
        "core.checkStat=default",
        "core.fileMode=true",
        "core.ignoreStat=false",
        "core.untrackedCache=false",
        "core.splitIndex=false",
    )
    for arg in ("-c", pair)
)
_RESET = ("reset", "-q", "--hard", "--no-recurse-submodules")


def record_index(gitdir: str, base: str, copy: Path, since: int) -> tuple[str, ...]:
    """Keep the copy's index (just written by a checkout or a restore that started in second
    ``since``) as the record the next restore compares the copy with, and the files written
    since then (:func:`~snodo.engine.poolscan.save`, with no earlier record: every directory
    read). Returns every directory of the copy (root-relative)."""
    ref = Path(gitdir) / REF_INDEX
    tmp = ref.with_name(f"{REF_INDEX}.tmp")
    shutil.copy2(Path(gitdir) / "index", tmp)  # with its mtime: git's racy-entry check reads it
    os.replace(tmp, ref)
    written, dirs = poolscan.save(gitdir, copy, None, since)
    poolscan.write_names(gitdir, RACY, written)
    _record_base(gitdir, base)
    return dirs


#: The files the last restore wrote (see :func:`~snodo.engine.poolscan.scan`),
#: NUL-separated: the next restore gives them their mode back by name.
RACY = "snodo-restore.written"


def _record_base(gitdir: str, base: str) -> None:
    with open(os.path.join(gitdir, REF_BASE), "w", encoding="ascii") as fh:
        fh.write(base)


def recorded_base(gitdir: str) -> str | None:
    """The commit whose tree :data:`REF_INDEX` holds, as the last restore recorded it."""
    try:
        with open(os.path.join(gitdir, REF_BASE), encoding="ascii") as fh:
            return fh.read(100).strip() or None
    except (OSError, UnicodeDecodeError):
        return None


def install_index(source: Path, target: Path) -> None:
    """Make ``target`` the same index as ``source``: a second name for the same file (its
    mtime, which git's racy-entry check reads, included), renamed into place; a copy where
    the file system has no hard links. Sharing is safe because git never writes an index in
    place — it renames a new file over it — and no confined process can write a git
    directory: what git does to one name leaves the other as it was."""
    tmp = target.with_name(f"{target.name}.snodo-tmp")
    with contextlib.suppress(FileNotFoundError):
        os.unlink(tmp)
    try:
        os.link(source, tmp)
    except OSError:
        shutil.copy2(source, tmp)
    os.replace(tmp, target)


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
    check = run_git(
        copy, "--no-optional-locks", *pinned, "status", "--porcelain=v1", "-z", "--ignored", "--untracked-files=normal"
    )
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


def _forget_history(gitdir: str) -> None:
    for name in _HISTORY:
        with contextlib.suppress(FileNotFoundError, IsADirectoryError):
            os.unlink(os.path.join(gitdir, name))


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
