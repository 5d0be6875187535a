"""Working copies reused across runs, one per concurrent run of a project.

Under ``$SNODO_HOME/worktrees/<project-key>/``: ``pool/slot-<n>/`` is a detached working copy;
``pool.locks/slot-<n>.lock`` is ``flock``-ed by the run using it and records the run and the
copy's git directory. A free lock still naming a run belonged to a killed run
(:func:`snodo.engine.worktree.reclaim_abandoned`). Why a restore is exact, and what it
costs: docs/architecture.md, "The life cycle of a task's work".
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import secrets
import shutil
import stat
import time
from collections.abc import Callable
from datetime import timedelta
from pathlib import Path
from typing import Any

from snodo.engine.poolmodes import load_walk, remove_tree, repair, save_walk
from snodo.git.runner import GitResult, is_commit_id, run_git
from snodo.workspace.gitmeta import remember_walk

POOL = "pool"
LOCKS = "pool.locks"
#: Copies being deleted are renamed here first, so they leave the pool in one step.
TRASH = "trash"
#: A copy no run has used for this long is dropped.
IDLE_TTL = timedelta(days=3)
#: Files of a copy's private git directory that would show the previous run's commits.
_HISTORY = ("logs/HEAD", "ORIG_HEAD", "AUTO_MERGE", "FETCH_HEAD", "MERGE_HEAD", "CHERRY_PICK_HEAD", "REVERT_HEAD")
#: The index the last restore left, under a name no git command refreshes.
REF_INDEX = "snodo-restore.index"
#: The commit :data:`REF_INDEX` holds the tree of (what the engine's first commit builds on).
REF_BASE = "snodo-restore.base"
#: The last restore's walk of the copy: the next one reads only the directories changed since,
#: and ``clean`` looks only where they hold something new (else the whole copy, past these bounds).
REF_DIRS = "snodo-restore.dirs"
_SCOPE_PATHS, _SCOPE_BYTES = 2_000, 100_000
#: Stat data compared in full, and no untracked cache or fsmonitor to trust. The index is
#: split (`sharedindex.*` beside it in the git directory): a write of it writes the entries
#: that changed, not the whole tree's; shared files expire as git's default has them.
STAT_TRUST = tuple(
    arg
    for pair in (
        "core.trustctime=true",
        "core.checkStat=default",
        "core.fileMode=true",
        "core.ignoreStat=false",
        "core.untrackedCache=false",
        "core.splitIndex=true",
        "splitIndex.maxPercentChange=20",
        "splitIndex.sharedIndexExpire=2.weeks.ago",
    )
    for arg in ("-c", pair)
)


def try_lock(path: Path, flags: int = os.O_RDWR | os.O_CREAT) -> int | None:
    """A descriptor of ``path`` holding its exclusive ``flock`` (freed when the holder dies),
    or ``None`` while another process holds it."""
    fd = os.open(path, flags, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        os.close(fd)
        return None
    return fd


class Slot:
    """One locked slot of the pool."""

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

    def release(self) -> None:
        """Forget the run (keeping the copy's git directory on record) and free the lock."""
        if self.fd < 0:
            return
        with contextlib.suppress(OSError):
            gitdir = self.meta().get("gitdir")
            self.write_meta({"gitdir": gitdir} if gitdir else {})
        os.close(self.fd)
        self.fd = -1


def lock_slot(base_dir: Path, n: int) -> Slot | None:
    """Slot ``n`` locked by this process, or ``None`` when another process holds it."""
    (base_dir / LOCKS).mkdir(parents=True, exist_ok=True)
    fd = try_lock(base_dir / LOCKS / f"slot-{n}.lock")
    return None if fd is None else Slot(base_dir, n, fd)


def slot_numbers(base_dir: Path) -> list[int]:
    """The slots the pool has a lock file for, in order."""
    numbers = (lock.name.removeprefix("slot-").removesuffix(".lock") for lock in (base_dir / LOCKS).glob("slot-*.lock"))
    return sorted(int(n) for n in numbers if n.isdigit())


def take_free_slot(base_dir: Path) -> Slot:
    """The first slot no live process holds and no dead run names."""
    n = 0
    while True:
        slot = lock_slot(base_dir, n)
        if slot is not None:
            if "run_id" not in slot.meta():
                return slot
            os.close(slot.fd)
        n += 1


def restore(slot: Slot, base: str | Callable[[], str]) -> bool:
    """Bring the slot's copy back to exactly ``base`` (no changed, untracked or ignored file,
    no nested repository, every mode as a fresh checkout makes it, no earlier run's history)
    with ``clean -ffdx`` and a forced checkout against the index the last restore recorded;
    ``False``: make a fresh copy. ``base`` may be a function, called when the reset needs it."""
    gitdir = slot.meta().get("gitdir")
    if not isinstance(gitdir, str) or not _trusted(slot, gitdir):
        return False
    ref = Path(gitdir) / REF_INDEX
    if not ref.is_file() or ref.is_symlink():
        return False
    before, scope = load_walk(Path(gitdir) / REF_DIRS, slot.path), list[str]()
    walked = repair(slot.path, before, int(ref.stat().st_mtime), scope)
    if walked is None:
        return False
    remember_walk(slot.path, walked)
    work = ref.with_name(f"{REF_INDEX}.work")
    os.replace(ref, work)  # moved, not copied: its mtime is what git's racy-entry check reads
    pinned = (f"--git-dir={gitdir}", f"--work-tree={slot.path}", *STAT_TRUST)
    record = {"GIT_INDEX_FILE": str(work)}
    target = ""
    if not before or len(scope) > _SCOPE_PATHS or sum(map(len, scope)) > _SCOPE_BYTES:
        cleaned = _silent(run_git(slot.path, *pinned, "clean", "-ffdxq", env=record))
    else:  # only where an untracked path can be (`repair`): nowhere when nothing changed
        literal = {**record, "GIT_LITERAL_PATHSPECS": "1"}
        cleaned = not scope or _silent(run_git(slot.path, *pinned, "clean", "-ffdxq", "--", *scope, env=literal))
    if cleaned:
        target = base() if callable(base) else base
    # `reset --hard`'s one-way merge, run by `checkout -f`, which first compares the stat data
    # of every entry in parallel threads (git's preload); `reset` compares them one by one.
    reset = ("-c", "core.preloadIndex=true", "checkout", "-q", "-f", "--no-recurse-submodules", "--detach", target)
    if target and _silent(run_git(slot.path, *pinned, *reset, env=record)):
        install_index(work, Path(gitdir) / "index")
        os.replace(work, ref)
        _forget_history(gitdir)
        _record_base(gitdir, target)
        with contextlib.suppress(OSError):  # an older walk stays true: it is read only where nothing changed
            save_walk(Path(gitdir) / REF_DIRS, slot.path, {d: w for d, w in walked.items() if _is_dir(d)})
        return True
    with contextlib.suppress(FileNotFoundError):
        os.unlink(work)
    return False


def _is_dir(path: str) -> bool:
    """Whether ``path`` is a directory still (``clean`` removes the new ones: a directory made
    there again later is new again, to be cleaned whole)."""
    try:
        return stat.S_ISDIR(os.lstat(path).st_mode)
    except OSError:
        return False


def _trusted(slot: Slot, gitdir: str) -> bool:
    """Whether the copy's ``.git`` (which an agent could point anywhere) is what snodo wrote."""
    if not os.path.isdir(gitdir) or not slot.path.is_dir():
        return False
    try:
        with open(slot.path / ".git", encoding="utf-8") as fh:
            return fh.read() == f"gitdir: {gitdir}\n" and os.path.isfile(slot.path / ".git")
    except (OSError, UnicodeDecodeError):
        return False


def _silent(result: GitResult) -> bool:
    return result.ok and not result.stderr.strip()


def record_index(gitdir: str, base: str) -> None:
    """Keep the copy's index, just written, as the record the next restore compares with."""
    ref = Path(gitdir) / REF_INDEX
    tmp = ref.with_name(f"{REF_INDEX}.tmp")
    shutil.copy2(Path(gitdir) / "index", tmp)  # with its mtime: git's racy-entry check reads it
    os.replace(tmp, ref)
    _record_base(gitdir, base)


def _record_base(gitdir: str, base: str) -> None:
    with open(os.path.join(gitdir, REF_BASE), "w", encoding="ascii") as fh:
        fh.write(base)


def install_index(source: Path, target: Path) -> None:
    """Make ``target`` the same index as ``source`` (mtime included: git's racy-entry check
    reads it): a hard link renamed into place, or a copy. Sharing is safe: git never writes
    an index in place, and no confined process can write a git directory."""
    tmp = target.with_name(f"{target.name}.snodo-tmp")
    with contextlib.suppress(FileNotFoundError):
        os.unlink(tmp)
    try:
        os.link(source, tmp)
    except OSError:
        shutil.copy2(source, tmp)
    os.replace(tmp, target)


def detached_head(gitdir: str) -> str | None:
    """The commit id a copy's detached HEAD names, read from its git directory, or ``None``."""
    try:
        with open(os.path.join(gitdir, "HEAD"), encoding="ascii") as fh:
            text = fh.read(100).strip()
    except (OSError, UnicodeDecodeError):
        return None
    return text if is_commit_id(text) else None


def _forget_history(gitdir: str) -> None:
    for name in _HISTORY:
        with contextlib.suppress(FileNotFoundError, IsADirectoryError):
            os.unlink(os.path.join(gitdir, name))


def trash(base_dir: Path, path: Path) -> None:
    """Delete a copy: renamed out of the pool in one step, then removed."""
    if not os.path.lexists(path):
        return
    bin_dir = base_dir / TRASH
    bin_dir.mkdir(parents=True, exist_ok=True)
    target = bin_dir / f"{path.name}-{secrets.token_hex(4)}"
    try:
        os.replace(path, target)
    except OSError:
        target = path
    with contextlib.suppress(OSError):
        remove_tree(target)


def drop_idle(repo: Path, base_dir: Path, *, older_than: timedelta = IDLE_TTL) -> list[str]:
    """Remove the copies no run used (by the lock file's change time) for ``older_than``;
    the slots dropped."""
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
        for left in list((base_dir / TRASH).iterdir()):  # a deletion an earlier process did not finish
            with contextlib.suppress(OSError):
                remove_tree(left)
    return dropped
