"""Judging what an in-place coder (``writes_in_place``) did, by the tool surface's one rule.

Before it runs, the engine snapshots what it could reach and should not change: the
workspace's files, its parent (``../x``; other runs' copies aside) and the repository state
(the common git directory's configuration, hooks, refs and the rest, this worktree's own git
directory and index entries). Afterwards every difference goes through the same
:class:`~snodo.rules.guard.PathGuard` as a tool-surface write. Only a coder declaring
``commits_own_changes`` may commit; its commits must extend the task branch, and the paths
they change are judged like the rest. Other runs' branches, git's volatile files and snodo's
runtime state are left out: concurrent runs change them legitimately.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Collection, Iterable, Mapping
from pathlib import Path

from attrs import frozen

from snodo.base.errors import PathValidationError, ToolError
from snodo.engine.snapshot import (
    Saved,
    differences,
    entries_below,
    fingerprint,
    fingerprints,
    git_dirs,
    git_label,
    outside_of,
    packed_refs,
    put_back,
    read_text,
    save,
)
from snodo.rules.guard import REASON_GIT, REASON_OUTSIDE
from snodo.state.runtime import DIRNAME as RUNTIME_DIRNAME
from snodo.workspace import Git, PathGuard

# Files of a git directory that git rewrites on its own and that cannot make it run anything.
_VOLATILE_NAMES = frozenset(
    {
        "index",
        "index.lock",
        "FETCH_HEAD",
        "ORIG_HEAD",
        "COMMIT_EDITMSG",
        "AUTO_MERGE",
        "MERGE_HEAD",
        "MERGE_MSG",
        "MERGE_MODE",
        "MERGE_RR",
        "REBASE_HEAD",
        "CHERRY_PICK_HEAD",
        "REVERT_HEAD",
        "BISECT_LOG",
        "gc.pid",
        "gc.log",
        "packed-refs",
        "description",
    }
)
_VOLATILE_DIRS = frozenset({"objects", "logs", "refs", "rr-cache", "lost-found", "worktrees"})
_OTHER_RUNS = "refs/heads/snodo/"
REASON_UNDECLARED_COMMIT = "the coder declares commits_own_changes=False but moved HEAD, a branch or made commits"
REASON_REWRITE = "the coder's commits do not extend the task branch (history rewritten or HEAD switched)"


@frozen(kw_only=True)
class Judgement:
    """What an in-place coder changed: paths kept, paths refused (with the guard's reason), its commits."""

    changed: tuple[str, ...]
    refused: tuple[tuple[str, str], ...]
    commits: tuple[str, ...] = ()
    head: str | None = None
    signature: tuple[tuple[str, str], ...] = ()
    restored: tuple[str, ...] = ()

    def message(self, coder: str) -> str:
        shown = ", ".join(path for path, _ in self.refused[:5])
        more = f" and {len(self.refused) - 5} more" if len(self.refused) > 5 else ""
        put_back = "; what it changed outside its working copy was put back" if self.restored else ""
        return (
            f"coder {coder!r} changed what it may not change ({shown}{more}): `.snodo/`, `.git/`, "
            f"protected paths and anything outside its working copy are refused{put_back}; "
            "the audit log has one path_refused event per path"
        )


@frozen(kw_only=True)
class _Snapshot:
    tree: Mapping[str, str]
    outside: Mapping[str, str]
    git: Mapping[str, str]
    refs: Mapping[str, str]
    index: Mapping[str, str]


class InPlaceWatch:
    """Snapshot a working copy before an in-place coder runs; :meth:`judge` it afterwards."""

    def __init__(self, workspace: Path, guard: PathGuard, *, branch: str, commits_own_changes: bool) -> None:
        self.root = guard.root
        self.guard = guard
        self.git = Git(workspace, guard)
        self.branch_ref = f"refs/heads/{branch}"
        self.commits_own_changes = commits_own_changes
        self.gitdir, self.common = git_dirs(self.root)
        self.head_name = git_label(self.gitdir, self.common) + "/HEAD"
        if self.gitdir is not None and not read_text(self.gitdir / "HEAD").startswith("ref:"):
            # A detached working copy (the engine's runs): its own HEAD is the task's tip.
            self.branch_ref = self.head_name
        self.before = self._snapshot(read_index=True)
        # What lies outside the working copy is put back if the coder changes it.
        self.saved = {
            label: (path, save(path)) for label, path in {**self._git_entries(), **outside_of(self.root)}.items()
        }

    def judge(self) -> Judgement:
        after = self._snapshot(read_index=False)
        before = self.before
        refused: list[tuple[str, str]] = []
        changed: set[str] = set()
        self._sort(differences(before.tree, after.tree), lambda path: path in after.tree, refused, changed)
        refused += [(path, REASON_OUTSIDE) for path in differences(before.outside, after.outside)]
        git_touched = differences(before.git, after.git)
        refused += [(path, REASON_GIT) for path in git_touched]
        moved_refs = differences(before.refs, after.refs)
        refused += self._ref_refusals(moved_refs)
        commits: tuple[str, ...] = ()
        head: str | None = None
        # Git is only asked anything more once its configuration and hooks are known unchanged.
        if not git_touched:
            commits, head = self._through_git(after, moved_refs, refused, changed)
        refused = sorted(set(refused))
        if refused:
            return self._undo(refused, after, moved_refs)
        signature = tuple((path, after.tree.get(path, "")) for path in sorted(changed))
        kept = self._committable(sorted(changed))
        return Judgement(changed=kept, refused=(), commits=commits, head=head, signature=signature)

    def _sort(
        self,
        paths: Iterable[str],
        exists: Callable[[str], bool],
        refused: list[tuple[str, str]],
        changed: set[str],
    ) -> None:
        for path in paths:
            try:  # if the path exists, what it leads to is judged too
                self.guard.check_mutation(path, follow_symlinks=exists(path))
            except PathValidationError as exc:
                refused.append((path, exc.reason))
            else:
                changed.add(path)

    def _on_disk(self, path: str) -> bool:
        return os.path.lexists(self.root / path)

    def _ref_refusals(self, moved_refs: Iterable[str]) -> list[tuple[str, str]]:
        """Refs the coder moved: HEAD never, the task branch only by a committing coder."""
        refused: list[tuple[str, str]] = []
        for ref in moved_refs:
            if ref == self.branch_ref and self.commits_own_changes:
                continue  # judged in _through_git: it must extend the branch
            if ref == self.head_name:  # detached or switched: never, not even by a committing coder
                refused.append((ref, REASON_REWRITE if self.commits_own_changes else REASON_UNDECLARED_COMMIT))
            else:
                refused.append((f".git/{ref}", REASON_UNDECLARED_COMMIT if ref == self.branch_ref else REASON_GIT))
        return refused

    def _through_git(
        self, after: _Snapshot, moved_refs: Collection[str], refused: list[tuple[str, str]], changed: set[str]
    ) -> tuple[tuple[str, ...], str | None]:
        """What git says changed (the index, a committing coder's commits); its commits and tip."""
        before = self.before
        try:
            index = self._index()
        except ToolError as exc:
            where = f"{git_label(self.gitdir, self.common)}/index"
            refused.append((where, f"{REASON_GIT}; it is unreadable now: {exc}"))
            index = dict(before.index)
        self._sort(differences(before.index, index), self._on_disk, refused, changed)
        if not (self.commits_own_changes and self.branch_ref in moved_refs and before.refs.get(self.branch_ref)):
            return (), None
        old, new = before.refs[self.branch_ref], after.refs.get(self.branch_ref, "")
        if not self._extends(old, new):
            refused.append((self._ref_label(self.branch_ref), REASON_REWRITE))
            return (), None
        commits = tuple(self._lines("rev-list", "--reverse", f"{old}..{new}"))
        names = self._lines("diff", "--name-only", "--no-renames", "-z", old, new, "--")
        self._sort(names, self._on_disk, refused, changed)
        return commits, new

    def _undo(self, refused: list[tuple[str, str]], after: _Snapshot, moved_refs: Collection[str]) -> Judgement:
        """Put back what the refused writes touched, the task branch included."""
        restored = self._restore({path for path, _ in refused}, after)
        old_tip = self.before.refs.get(self.branch_ref)
        branch = self._ref_label(self.branch_ref)
        config = ".git/config"
        git_safe = config not in {path for path, _ in refused} or config in restored
        moved = git_safe and self.branch_ref in moved_refs and branch not in restored and old_tip
        if moved and self._put_back_ref(self.branch_ref, old_tip):
            restored.append(branch)
        return Judgement(changed=(), refused=tuple(refused), restored=tuple(sorted(restored)))

    def _restore(self, refused: set[str], after: _Snapshot) -> list[str]:
        """Put back what the coder changed outside its working copy (discarded with the run); the paths put back."""
        before = self.before
        snapshots = (before.git, after.git, before.outside, after.outside)
        current = {**self._git_entries(), **outside_of(self.root)}
        restored: list[str] = []
        for label in sorted(refused, key=lambda p: (p.rstrip("/").count("/"), p), reverse=True):
            if not any(label in snapshot for snapshot in snapshots):
                continue
            path, saved = self.saved.get(label, (current.get(label), None))
            if path is not None and put_back(path, saved):
                restored.append(label)
        if ".git/config" in refused and ".git/config" not in restored:
            return restored  # git is not run again on a configuration it could not put back
        for ref in differences(before.refs, after.refs):
            label = self._ref_label(ref)
            if label in refused and not ref.startswith("reftable/") and self._put_back_ref(ref, before.refs.get(ref)):
                restored.append(label)
        return restored

    def _put_back_ref(self, ref: str, old: str | None) -> bool:
        try:
            if ref == self.head_name:
                if self.gitdir is None or not old:
                    return False
                return put_back(self.gitdir / "HEAD", Saved(kind="file", data=(old + "\n").encode(), mode=0o644))
            if old is None:
                self._lines("update-ref", "--no-deref", "-d", ref)
            elif old.startswith("ref:"):
                self._lines("symbolic-ref", ref, old.removeprefix("ref:").strip())
            else:
                self._lines("update-ref", "--no-deref", ref, old)
        except ToolError:
            return False
        return True

    def _committable(self, paths: list[str]) -> tuple[str, ...]:
        """The changed paths git can stage: not ignored files, nor untracked ones deleted."""
        if not paths:
            return ()
        # Ignored untracked entries, a wholly ignored directory as one `dir/` entry.
        ignored = tuple(self._lines("ls-files", "-z", "--others", "--ignored", "--exclude-standard", "--directory"))
        tracked = set(self._lines("ls-files", "-z"))

        def wanted(path: str) -> bool:
            if path in tracked:
                return True
            if any(path == entry or (entry.endswith("/") and path.startswith(entry)) for entry in ignored):
                return False
            return os.path.lexists(self.root / path)

        return tuple(p for p in paths if wanted(p))

    def _extends(self, old: str, new: str) -> bool:
        if not new or not all(c in "0123456789abcdef" for c in new + old):
            return False
        return self._lines("merge-base", old, new, check=False) == [old]

    def _lines(self, *args: str, check: bool = True) -> list[str]:
        # The git directory is named, never discovered: a coder that replaced the worktree's
        # `.git` file must not lead these commands into another repository.
        where = [f"--git-dir={self.gitdir}", f"--work-tree={self.root}"] if self.gitdir is not None else []
        out = self.git._run("-c", "core.fsmonitor=false", *where, *args, check=check)
        sep = "\0" if "-z" in args else "\n"
        return [line for line in out.split(sep) if line]

    def _snapshot(self, *, read_index: bool) -> _Snapshot:
        return _Snapshot(
            # A plain repository's .git is judged by the git snapshot; a worktree's is a file here.
            tree=fingerprints(
                entries_below(self.root, prune_top={".git"} if self.gitdir == self.root / ".git" else ())
            ),
            outside=fingerprints(outside_of(self.root)),
            git=fingerprints(self._git_entries()),
            refs=self._refs(),
            index=self._index() if read_index else {},
        )

    def _git_entries(self) -> dict[str, Path]:
        if self.common is None:
            return {}
        found: dict[str, Path] = {}
        # A plain repository's HEAD is this working copy's HEAD, judged with the refs.
        skip = _VOLATILE_NAMES | ({"HEAD"} if self.gitdir == self.common else set())
        # snodo's runtime state changes while the coder runs; confined code cannot write it.
        runtime = {RUNTIME_DIRNAME}
        for path, full in entries_below(self.common, prune=_VOLATILE_DIRS, prune_top=runtime, skip=skip).items():
            found[f".git/{path}"] = full
        # objects/info/alternates would let git read objects from anywhere.
        found.update({f".git/objects/info/{p}": f for p, f in entries_below(self.common / "objects" / "info").items()})
        if self.gitdir is not None and self.gitdir != self.common:
            name = git_label(self.gitdir, self.common)
            own = entries_below(self.gitdir, prune=_VOLATILE_DIRS, skip=_VOLATILE_NAMES | {"HEAD"})
            found.update({f"{name}/{path}": full for path, full in own.items()})
        return found

    def _ref_label(self, ref: str) -> str:
        return ref if ref == self.head_name else f".git/{ref}"

    def _refs(self) -> dict[str, str]:
        """Every ref by name (``refs/…``), packed or loose, and this worktree's HEAD."""
        if self.common is None or self.gitdir is None:
            return {}
        refs = packed_refs(self.common / "packed-refs")
        for base in {self.common, self.gitdir}:
            refs.update({f"refs/{path}": read_text(full) for path, full in entries_below(base / "refs").items()})
        refs.update({f"reftable/{n}": fingerprint(f) for n, f in entries_below(self.common / "reftable").items()})
        refs = {name: sha for name, sha in refs.items() if not name.startswith(_OTHER_RUNS) or name == self.branch_ref}
        refs[self.head_name] = read_text(self.gitdir / "HEAD")
        return refs

    def _index(self) -> dict[str, str]:
        """Staged entries (mode, object, stage) by path; no stat data: a refreshed index is no change."""
        if self.gitdir is None:
            return {}
        entries: dict[str, str] = {}
        for record in self._lines("ls-files", "--stage", "-z"):
            meta, _, path = record.partition("\t")
            entries[path] = meta
        return entries
