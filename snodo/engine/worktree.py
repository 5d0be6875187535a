"""Per-run working copies (from :mod:`snodo.engine.pool`), and where a run's work goes: a
completed run's branch, a halted run's ``refs/snodo/halted/<task>/<run>``, or nowhere when a
discarding constraint failed (docs/architecture.md, "The life cycle of a task's work").
Copies from before the pool (``<run_id>/`` beside ``<run_id>.lock``) are reclaimed and removed.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import shutil
from collections.abc import Callable
from concurrent.futures import wait
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from attrs import define, field

from snodo.base.errors import EnvironmentProblem, SnodoError
from snodo.engine import pool
from snodo.engine.checkout import looking, read_head, rev
from snodo.git.runner import FALLBACK_IDENTITY, adopt, git_out, pin, run_git

HALTED_NAMESPACE = "refs/snodo/halted"
#: A fresh copy checks out the whole tree: minutes on a very large repository.
CHECKOUT_TIMEOUT = 1800.0


def project_key(root: Path) -> str:
    return hashlib.sha256(str(root.resolve()).encode()).hexdigest()[:16]


def worktrees_dir(home: Path, repo: Path) -> Path:
    return home / "worktrees" / project_key(repo)


@define(kw_only=True)
class Worktree:
    """One run's working copy. ``branch`` is the name the work gets if the run completes."""

    path: Path
    branch: str
    base: str
    repo: Path
    task_id: str
    run_id: str
    lock_path: Path | None = None
    _lock_fd: int | None = field(default=None, alias="lock_fd")
    #: the pool slot the copy belongs to (``None``: a copy of its own, removed at the end)
    slot: pool.Slot | None = None
    _looking: Callable[[], tuple[str, ...]] | None = field(default=None, alias="looking")
    #: restored to its base and checked clean (or made fresh), nothing run in it yet
    clean_at_start: bool = False

    @property
    def left_out(self) -> tuple[str, ...]:
        """What the user's checkout had uncommitted when the run started (waits for the
        ``status`` running beside the run)."""
        return self._looking() if self._looking is not None else ()

    def tip(self) -> str | None:
        """The commit the working copy's HEAD is at (``None`` once it is gone)."""
        if not self.path.is_dir():
            return None
        gitdir = self.slot.meta().get("gitdir") if self.slot is not None else None
        return (pool.detached_head(gitdir) if isinstance(gitdir, str) else None) or rev(self.path, "HEAD")

    def keep_as_branch(self) -> None:
        """Put the completed work on ``branch`` (create-only: never moves an existing ref)."""
        tip = self.tip() or self.base
        git_out(
            self.repo, "update-ref", "-m", f"snodo: run {self.run_id} completed", f"refs/heads/{self.branch}", tip, ""
        )

    def keep_halted(self) -> str | None:
        """Keep the halted run's commits under the snodo namespace; ``None`` when it made none."""
        tip = self.tip()
        if tip is None or tip == self.base:
            return None
        ref = f"{HALTED_NAMESPACE}/{self.task_id}/{self.run_id}"
        git_out(self.repo, "update-ref", ref, tip, "")
        return ref

    def discard(self) -> dict[str, Any]:
        """Throw the run's work away: the working copy restored or removed (its HEAD reflog
        with it), then every object the run added that nothing else reaches deleted."""
        tip = self.tip()
        if self.slot is not None and not pool.restore(self.slot, self.base):
            pool.trash(self.path.parent.parent, self.path)
            run_git(self.repo, "worktree", "prune")
        self.remove()
        if tip is None or tip == self.base:
            return {"commits": 0, "objects_deleted": 0, "objects_left": 0}
        return purge_unreachable(self.repo, tip)

    def remove(self) -> None:
        """Give a pooled copy back to the pool, or drop a copy of its own. Idempotent."""
        if self.slot is not None:
            self.slot.release()
            return
        if self.path.exists():
            run_git(self.repo, "worktree", "remove", "--force", str(self.path))
        if self.path.exists():
            shutil.rmtree(self.path, ignore_errors=True)
        run_git(self.repo, "worktree", "prune")
        if self.lock_path is not None:
            with contextlib.suppress(FileNotFoundError):
                self.lock_path.unlink()
        if self._lock_fd is not None:
            os.close(self._lock_fd)
            self._lock_fd = None


def purge_unreachable(repo: Path, tip: str) -> dict[str, Any]:
    """Delete the loose objects only ``tip`` reaches (no ref, reflog or index); one already
    packed is counted in ``objects_left``."""
    listing = run_git(repo, "rev-list", "--objects", tip, "--not", "--all", "--reflog", "--indexed-objects")
    if not listing.ok:
        raise EnvironmentProblem(f"could not list the objects of the discarded work in {repo}: {listing.detail()}")
    shas = [line.split(" ", 1)[0] for line in listing.stdout.splitlines() if line.strip()]
    commits = run_git(repo, "rev-list", "--count", tip, "--not", "--all", "--reflog").stdout.strip()
    objects = Path(git_out(repo, "rev-parse", "--path-format=absolute", "--git-common-dir")) / "objects"
    deleted = left = 0
    for sha in shas:
        loose = objects / sha[:2] / sha[2:]
        try:
            loose.unlink()
            deleted += 1
        except FileNotFoundError:
            left += 1
    found: dict[str, Any] = {"commits": int(commits or 0), "objects_deleted": deleted, "objects_left": left}
    if left:
        found["note"] = (
            f"{left} object(s) of the discarded work were already packed; `git gc --prune=now` in {repo} removes them"
        )
    return found


def refs_with(root: Path, field: str, namespace: str) -> dict[str, str]:
    """Each ref under ``namespace`` with one of its ``for-each-ref`` fields."""
    listing = run_git(root, "for-each-ref", f"--format=%(refname) %({field})", namespace)
    return dict(line.rpartition(" ")[::2] for line in listing.stdout.splitlines()) if listing.ok else {}


def prune_halted(root: Path, *, before: datetime) -> list[str]:
    """Delete the halted refs whose commit is older than ``before``; their names."""
    stamps = refs_with(root, "committerdate:unix", HALTED_NAMESPACE)
    old = [ref for ref, stamp in stamps.items() if stamp.isdigit() and datetime.fromtimestamp(int(stamp), UTC) < before]
    return [ref for ref in old if run_git(root, "update-ref", "-d", ref).ok]


def require_repo(root: Path) -> None:
    if shutil.which("git") is None:
        raise EnvironmentProblem("git is not installed", hint="install git; snodo commits on task branches")
    if pin(root) is None:
        raise EnvironmentProblem(f"{root} is not a git repository", hint="run `git init` in the project first")


def reclaim_abandoned(
    repo: Path, home: Path, *, judge: Callable[[Worktree], list[dict[str, str]]] | None = None
) -> list[dict[str, Any]]:
    """Clean up after runs that died (SIGKILL, power loss): their commits go under the halted
    namespace unless ``judge`` (the discarding constraints) finds a reason to throw them
    away; a pooled copy goes back to the pool. Returns what was reclaimed."""
    directory = worktrees_dir(home, repo)
    if not directory.is_dir():
        return []
    found: list[Worktree] = []
    for n in pool.slot_numbers(directory):
        slot = pool.lock_slot(directory, n)
        if slot is None:
            continue
        meta = slot.meta()
        if "run_id" not in meta:
            slot.release()
            continue
        found.append(_left_behind(repo, slot.path, meta, str(meta["run_id"]), slot=slot))
    for lock in sorted(directory.glob("*.lock")):
        fd = None
        with contextlib.suppress(FileNotFoundError):
            fd = pool.try_lock(lock, os.O_RDWR)  # free: its owner is dead
        if fd is None:
            continue
        try:
            meta = json.loads(lock.read_text(encoding="utf-8") or "{}")
        except (OSError, ValueError):
            meta = {}
        run_id = lock.name.removesuffix(".lock")
        found.append(_left_behind(repo, directory / run_id, meta, run_id, lock_path=lock, lock_fd=fd))
    return [_reclaim(wt, judge) for wt in found]


def prune_copies(repo: Path, home: Path, *, older_than: timedelta) -> list[dict[str, Any]]:
    """Reclaim the copies of dead runs (unjudged: pruning loads no protocol), then drop the
    copies no run used for ``older_than``. Returns them."""
    removed = [
        {"run_id": r["run_id"], "path": r["path"], "halted_ref": r["halted_ref"]} for r in reclaim_abandoned(repo, home)
    ]
    directory = worktrees_dir(home, repo)
    if not directory.is_dir():
        return removed
    for name in pool.drop_idle(repo, directory, older_than=older_than):
        removed.append({"run_id": name, "path": str(directory / pool.POOL / name), "halted_ref": None})
    cutoff = datetime.now(UTC) - older_than
    for path in sorted(directory.iterdir()):
        if path.name in (pool.POOL, pool.LOCKS, pool.TRASH) or not path.is_dir():
            continue
        unlocked = not (directory / f"{path.name}.lock").exists()
        if unlocked and datetime.fromtimestamp(path.stat().st_mtime, UTC) < cutoff:
            run_git(repo, "worktree", "remove", "--force", str(path))
            shutil.rmtree(path, ignore_errors=True)
            removed.append({"run_id": path.name, "path": str(path), "halted_ref": None})
    run_git(repo, "worktree", "prune")
    return removed


def drop_pool(repo: Path, home: Path) -> list[str]:
    """Drop every pooled copy of ``repo`` no run holds (``snodo session close``)."""
    directory = worktrees_dir(home, repo)
    return pool.drop_idle(repo, directory, older_than=timedelta(0)) if directory.is_dir() else []


def _left_behind(repo: Path, path: Path, meta: dict[str, Any], run_id: str, **lock: Any) -> Worktree:
    return Worktree(
        path=path,
        branch="",
        base=str(meta.get("base", "")),
        repo=repo,
        task_id=str(meta.get("task_id", "unknown-task")),
        run_id=run_id,
        **lock,
    )


def _reclaim(wt: Worktree, judge: Callable[[Worktree], list[dict[str, str]]] | None) -> dict[str, Any]:
    ref = None
    reasons: list[dict[str, str]] = []
    if judge is not None and wt.base:
        try:
            reasons = judge(wt)
        except SnodoError as exc:  # fail closed: work that cannot be judged is not kept
            reasons = [{"constraint": "-", "predicate": "-", "finding": f"could not be judged: {exc}"}]
    if reasons:
        with contextlib.suppress(SnodoError):
            wt.discard()
    else:
        with contextlib.suppress(SnodoError):
            ref = wt.keep_halted() if wt.base else None
    wt.remove()
    entry: dict[str, Any] = {"run_id": wt.run_id, "task_id": wt.task_id, "path": str(wt.path), "halted_ref": ref}
    if reasons:
        entry["discarded"] = reasons
    return entry


def run_base(repo: Path, head: str | None = None) -> str:
    """The commit a run starts from: ``HEAD`` (as ``head`` if the caller read it), or for a
    repository with no commit an empty base commit made with plumbing (no ref points at it)."""
    head = head or rev(repo, "HEAD")
    if head:
        return head
    require_repo(repo)  # no HEAD: say why if this is no repository at all
    identity = {
        f"GIT_{who}_{key.upper()}": FALLBACK_IDENTITY[f"user.{key}"]
        for who in ("AUTHOR", "COMMITTER")
        for key in ("name", "email")
    }
    empty_tree = git_out(repo, "hash-object", "-t", "tree", "/dev/null")
    return git_out(
        repo, "commit-tree", empty_tree, "-m", "snodo: empty base for a repository with no commits", env=identity
    )


def create_worktree(repo: Path, home: Path, task_id: str, run_id: str) -> Worktree:
    """The run's working copy: a free slot of the project's pool, restored to the base (the
    user's HEAD) or made fresh. What their checkout has uncommitted is read by a ``status``
    running alongside (:func:`~snodo.engine.checkout.looking`), waited for at the end."""
    directory = worktrees_dir(home, repo)
    look = looking(repo)
    slot = pool.take_free_slot(directory)
    try:
        early = read_head(repo)
        restored = pool.restore(slot, early or (lambda: run_base(repo, look.result()[0])))
        head = early or run_base(repo, look.result()[0])
        if not restored:
            _fresh_copy(repo, directory, slot, head)
        _pin_copy(repo, slot)  # its own git directory, named by every later command in it
        meta = {
            "task_id": task_id,
            "run_id": run_id,
            "base": head,
            "pid": os.getpid(),
            "repo": str(repo),
            "created_at": datetime.now(UTC).isoformat(timespec="seconds"),
        }
        slot.write_meta({**slot.meta(), **meta})  # from here a death leaves the run to reclaim
        pool.drop_idle(repo, directory)
    except BaseException:
        slot.release()
        wait([look])
        raise

    def left_out() -> tuple[str, ...]:
        try:
            return tuple(look.result()[1])
        except SnodoError:  # a status that timed out: nothing to report, as when it fails
            return ()

    return Worktree(
        path=slot.path,
        branch=f"snodo/{task_id}-{run_id}",
        base=head,
        repo=repo,
        task_id=task_id,
        run_id=run_id,
        lock_path=slot.lock_path,
        slot=slot,
        looking=left_out,
        clean_at_start=True,
    )


def _pin_copy(repo: Path, slot: pool.Slot) -> None:
    """Pin the copy to the git directory snodo recorded when it made it, else ask git."""
    gitdir, root = slot.meta().get("gitdir"), pin(repo)
    if not isinstance(gitdir, str) or root is None or adopt(slot.path, Path(gitdir), root) is None:
        pin(slot.path)


def _fresh_copy(repo: Path, directory: Path, slot: pool.Slot, head: str) -> None:
    """Replace the slot's copy with a new ``git worktree add``, recording its git directory
    before any agent runs in it."""
    if os.path.lexists(slot.path):
        pool.trash(directory, slot.path)
    slot.write_meta({})
    if slot.path.parent.is_dir():
        run_git(repo, "worktree", "prune")
    slot.path.parent.mkdir(parents=True, exist_ok=True)
    made = run_git(repo, "worktree", "add", "-q", "--detach", str(slot.path), head, timeout=CHECKOUT_TIMEOUT)
    if not made.ok:
        raise EnvironmentProblem(f"git worktree add failed in {repo}: {made.detail()}")
    text = (slot.path / ".git").read_text(encoding="utf-8")
    if not text.startswith("gitdir: "):
        raise EnvironmentProblem(f"git made no linked working copy at {slot.path}")
    gitdir = text.removeprefix("gitdir: ").strip()
    pool.record_index(gitdir, head)  # what the first restore compares with
    slot.write_meta({"gitdir": gitdir})
