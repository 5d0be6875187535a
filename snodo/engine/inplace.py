"""Judging what an in-place coder did, by the one rule the tool surface uses.

A coder that declares ``writes_in_place`` edits its working copy itself. Before it runs the
engine takes a snapshot of everything it could reach and should not change; afterwards every
difference goes through the same :class:`~snodo.workspace.guard.PathGuard` as a tool-surface
write, so ``.snodo/`` at any depth, the protocol's ``protected_paths``, ``.git`` and anything
outside the workspace are refused alike. The snapshot covers:

* the workspace's files (content, executable bit, symlink target), the worktree's ``.git``
  file and any nested ``.git`` included;
* the workspace's parent directory (``../x`` lands there), sibling working copies of other
  runs aside;
* the repository state a coder could use against the user: the common git directory's
  ``config``, ``hooks/``, ``info/``, ``HEAD``, submodule directories and every ref, and this
  worktree's own git directory (its ``HEAD``, ``config.worktree``) and index entries.

Moving ``HEAD`` or the task branch, or making commits, is allowed only to a coder that
declares ``commits_own_changes``; its commits must extend the task branch, and the paths
they change are judged like the rest. Branches of other runs (``snodo/…``) and git's own
volatile files (objects, logs, the index's stat data, lock files) are left out: concurrent
runs change them legitimately.
"""

from __future__ import annotations

import hashlib
import os
import re
import shutil
import stat
from collections.abc import Iterable, Mapping
from pathlib import Path

from attrs import frozen

from snodo.errors import PathValidationError, ToolError
from snodo.workspace import Git, PathGuard
from snodo.workspace.guard import REASON_GIT, REASON_OUTSIDE

# Files of a git directory that git rewrites on its own (or that only record history) and
# that cannot make git run anything: left out of the snapshot.
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
_RUN_ID = re.compile(r"^[0-9a-f]{8}$")  # how snodo.engine.worktree names a run's working copy
REASON_UNDECLARED_COMMIT = "the coder declares commits_own_changes=False but moved HEAD, a branch or made commits"
REASON_REWRITE = "the coder's commits do not extend the task branch (history rewritten or HEAD switched)"


@frozen(kw_only=True)
class Judgement:
    """What an in-place coder changed: the paths kept as its change, the paths refused
    (each with the guard's reason) and the commits it made on the task branch."""

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
        self.gitdir, self.common = _git_dirs(self.root)
        if self.gitdir is not None and not _read(self.gitdir / "HEAD").startswith("ref:"):
            # A detached working copy (the engine's runs): its own HEAD is the task's tip.
            self.branch_ref = self._head_name()
        self.before = self._snapshot(read_index=True)
        # What lies outside the working copy is put back if the coder changes it.
        self.saved = {
            label: (path, _save(path)) for label, path in {**self._git_entries(), **_outside(self.root)}.items()
        }

    # ------------------------------------------------------------------ judging

    def judge(self) -> Judgement:
        after = self._snapshot(read_index=False)
        before = self.before
        refused: list[tuple[str, str]] = []
        changed: set[str] = set()
        for path in _differences(before.tree, after.tree):
            reason = self._refusal(path, exists=path in after.tree)
            if reason:
                refused.append((path, reason))
            else:
                changed.add(path)
        refused += [(path, REASON_OUTSIDE) for path in _differences(before.outside, after.outside)]
        git_touched = _differences(before.git, after.git)
        refused += [(path, REASON_GIT) for path in git_touched]
        head_ref = self._head_name()
        moved_refs = _differences(before.refs, after.refs)
        own = {self.branch_ref}
        commits: tuple[str, ...] = ()
        head: str | None = None
        for ref in moved_refs:
            if ref == self.branch_ref and self.commits_own_changes:
                continue  # judged below: it must extend the branch
            if ref == head_ref:  # detached or switched: never, not even by a committing coder
                refused.append((head_ref, REASON_REWRITE if self.commits_own_changes else REASON_UNDECLARED_COMMIT))
            else:
                refused.append((f".git/{ref}", REASON_UNDECLARED_COMMIT if ref in own else REASON_GIT))
        # Git is only asked anything more once its configuration and hooks are known unchanged.
        if not git_touched:
            try:
                index = self._index()
            except ToolError as exc:
                where = f"{_label(self.gitdir, self.common)}/index"
                refused.append((where, f"{REASON_GIT}; it is unreadable now: {exc}"))
                index = dict(before.index)
            for path in _differences(before.index, index):
                reason = self._refusal(path, exists=os.path.lexists(self.root / path))
                if reason:
                    refused.append((path, reason))
                else:
                    changed.add(path)
            if self.commits_own_changes and self.branch_ref in moved_refs and before.refs.get(self.branch_ref):
                old, new = before.refs[self.branch_ref], after.refs.get(self.branch_ref, "")
                if not self._extends(old, new):
                    refused.append((self._ref_label(self.branch_ref), REASON_REWRITE))
                else:
                    commits = tuple(self._lines("rev-list", "--reverse", f"{old}..{new}"))
                    head = new
                    for path in self._lines("diff", "--name-only", "--no-renames", "-z", old, new, "--"):
                        reason = self._refusal(path, exists=os.path.lexists(self.root / path))
                        if reason:
                            refused.append((path, reason))
                        else:
                            changed.add(path)
        refused = sorted(set(refused))
        if refused:
            restored = self._restore({path for path, _ in refused}, after)
            old_tip = before.refs.get(self.branch_ref)
            branch = self._ref_label(self.branch_ref)  # no refused work stays on the task branch
            config = ".git/config"
            git_safe = config not in {path for path, _ in refused} or config in restored
            moved = git_safe and self.branch_ref in moved_refs and branch not in restored and old_tip
            if moved and self._put_back_ref(self.branch_ref, old_tip):
                restored.append(branch)
            return Judgement(changed=(), refused=tuple(refused), restored=tuple(sorted(restored)))
        signature = tuple((path, after.tree.get(path, "")) for path in sorted(changed))
        kept = self._committable(sorted(changed))
        return Judgement(changed=kept, refused=(), commits=commits, head=head, signature=signature)

    # ------------------------------------------------------------------ restoring

    def _restore(self, refused: set[str], after: _Snapshot) -> list[str]:
        """Put back what the coder changed outside its working copy (repository state, the
        parent directory) as it was; the working copy itself is discarded with the run.
        Returns the paths put back."""
        before = self.before
        outside = [p for p in refused if p in before.git or p in after.git or p in before.outside or p in after.outside]
        current = {**self._git_entries(), **_outside(self.root)}
        restored: list[str] = []
        for label in sorted(outside, key=lambda p: (p.rstrip("/").count("/"), p), reverse=True):
            path, saved = self.saved.get(label, (current.get(label), None))
            if path is not None and _put_back(path, saved):
                restored.append(label)
        config = ".git/config"
        if config in refused and config not in restored:
            return restored  # git is not run again on a configuration it could not put back
        head_ref = self._head_name()
        for ref in sorted(r for r in set(before.refs) | set(after.refs) if before.refs.get(r) != after.refs.get(r)):
            label = head_ref if ref == head_ref else f".git/{ref}"
            if label not in refused or ref.startswith("reftable/"):
                continue
            if self._put_back_ref(ref, before.refs.get(ref)):
                restored.append(label)
        return restored

    def _put_back_ref(self, ref: str, old: str | None) -> bool:
        try:
            if ref == self._head_name():
                if self.gitdir is None or not old:
                    return False
                return _put_back(self.gitdir / "HEAD", _Saved(kind="file", data=(old + "\n").encode(), mode=0o644))
            if old is None:
                self._lines("update-ref", "--no-deref", "-d", ref)
            elif old.startswith("ref:"):
                self._lines("symbolic-ref", ref, old.removeprefix("ref:").strip())
            else:
                self._lines("update-ref", "--no-deref", ref, old)
        except ToolError:
            return False
        return True

    def _refusal(self, path: str, *, exists: bool) -> str | None:
        """The guard's reason for refusing a change of ``path``, or ``None``; a path that
        exists now is judged by what it leads to too (a new symlink out of the root)."""
        try:
            self.guard.check_mutation(path, follow_symlinks=exists)
        except PathValidationError as exc:
            return exc.reason
        return None

    def _committable(self, paths: list[str]) -> tuple[str, ...]:
        """The changed paths git can stage: ignored files (caches a coder's tools left) and
        untracked files the coder deleted are not part of the change."""
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
        """Whether ``new`` is a commit that has ``old`` in its history."""
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

    # ------------------------------------------------------------------ snapshot

    def _snapshot(self, *, read_index: bool) -> _Snapshot:
        return _Snapshot(
            tree=_tree(self.root, skip_git_dir=self.gitdir is not None and self.gitdir == self.root / ".git"),
            outside=_fingerprints(_outside(self.root)),
            git=_fingerprints(self._git_entries()),
            refs=self._refs(),
            index=self._index() if read_index else {},
        )

    def _git_entries(self) -> dict[str, Path]:
        if self.common is None:
            return {}
        found: dict[str, Path] = {}
        # A plain repository's HEAD is this working copy's HEAD, judged with the refs.
        skip = _VOLATILE_NAMES | ({"HEAD"} if self.gitdir == self.common else set())
        for path, full in _entries(self.common, prune=_VOLATILE_DIRS, skip=skip).items():
            found[f".git/{path}"] = full
        # objects/info/alternates would let git read objects from anywhere.
        found.update({f".git/objects/info/{p}": f for p, f in _entries(self.common / "objects" / "info").items()})
        if self.gitdir is not None and self.gitdir != self.common:
            name = _label(self.gitdir, self.common)
            own = _entries(self.gitdir, prune=_VOLATILE_DIRS, skip=_VOLATILE_NAMES | {"HEAD"})
            found.update({f"{name}/{path}": full for path, full in own.items()})
        return found

    def _ref_label(self, ref: str) -> str:
        return ref if ref == self._head_name() else f".git/{ref}"

    def _head_name(self) -> str:
        return _label(self.gitdir, self.common) + "/HEAD" if self.gitdir is not None else ".git/HEAD"

    def _refs(self) -> dict[str, str]:
        """Every ref by name (``refs/…``), packed or loose, and this worktree's HEAD."""
        if self.common is None or self.gitdir is None:
            return {}
        refs: dict[str, str] = {}
        packed = self.common / "packed-refs"
        if packed.is_file():
            for line in packed.read_text(errors="replace").splitlines():
                sha, _, name = line.partition(" ")
                if name and not line.startswith(("#", "^")):
                    refs[name] = sha
        for base in {self.common, self.gitdir}:
            for path, full in _entries(base / "refs").items():
                refs[f"refs/{path}"] = _read(full)
        for name, full in _entries(self.common / "reftable").items():
            refs[f"reftable/{name}"] = _fingerprint(full)
        refs = {name: sha for name, sha in refs.items() if not name.startswith(_OTHER_RUNS) or name == self.branch_ref}
        refs[self._head_name()] = _read(self.gitdir / "HEAD")
        return refs

    def _index(self) -> dict[str, str]:
        """Staged entries (mode, object, stage) by path: stat data left out, so a coder's
        ``git status`` refreshing the index is not a change."""
        if self.gitdir is None:
            return {}
        entries: dict[str, str] = {}
        for record in self._lines("ls-files", "--stage", "-z"):
            meta, _, path = record.partition("\t")
            entries[path] = meta
        return entries


# ------------------------------------------------------------------------ helpers


MAX_SAVED_BYTES = 4 * 1024 * 1024


@frozen(kw_only=True)
class _Saved:
    """An entry as it was, enough to put it back: a file's bytes and mode, a link's target,
    a directory; ``other`` (too large, special, unreadable) cannot be put back."""

    kind: str
    data: bytes = b""
    target: str = ""
    mode: int = 0o644


def _save(path: Path) -> _Saved:
    try:
        st = os.lstat(path)
        if stat.S_ISLNK(st.st_mode):
            return _Saved(kind="link", target=os.readlink(path))
        if stat.S_ISDIR(st.st_mode):
            return _Saved(kind="dir")
        if stat.S_ISREG(st.st_mode) and st.st_size <= MAX_SAVED_BYTES:
            return _Saved(kind="file", data=path.read_bytes(), mode=stat.S_IMODE(st.st_mode))
    except OSError:
        pass
    return _Saved(kind="other")


def _remove(path: Path) -> None:
    if path.is_dir() and not path.is_symlink():
        shutil.rmtree(path)
    elif os.path.lexists(path):
        path.unlink()


def _put_back(path: Path, saved: _Saved | None) -> bool:
    """Make ``path`` what ``saved`` says it was (absent when ``None``); whether it worked."""
    try:
        if saved is None:
            _remove(path)
            return True
        if saved.kind == "other":
            return False
        if saved.kind == "dir":
            if not path.is_dir() or path.is_symlink():
                _remove(path)
                path.mkdir(parents=True)
            return True
        _remove(path)
        path.parent.mkdir(parents=True, exist_ok=True)
        if saved.kind == "link":
            os.symlink(saved.target, path)
        else:
            path.write_bytes(saved.data)
            path.chmod(saved.mode)
    except OSError:
        return False
    return True


def _differences(before: Mapping[str, str], after: Mapping[str, str]) -> list[str]:
    return sorted(k for k in set(before) | set(after) if before.get(k) != after.get(k))


def _git_dirs(root: Path) -> tuple[Path | None, Path | None]:
    """This working copy's git directory and the common one (the user's ``.git`` for a
    worktree), read from the files themselves: no git command before the snapshot."""
    dot_git = root / ".git"
    if dot_git.is_dir() and not dot_git.is_symlink():
        return dot_git, dot_git
    try:
        text = dot_git.read_text(errors="replace").strip()
    except OSError:
        return None, None
    if not text.startswith("gitdir:"):
        return None, None
    gitdir = Path(os.path.realpath(root / text.removeprefix("gitdir:").strip()))
    try:
        common_text = (gitdir / "commondir").read_text(errors="replace").strip()
    except OSError:
        return gitdir, gitdir
    return gitdir, Path(os.path.realpath(gitdir / common_text))


def _label(gitdir: Path | None, common: Path | None) -> str:
    if gitdir is None or common is None or gitdir == common:
        return ".git"
    try:
        return ".git/" + gitdir.relative_to(common).as_posix()
    except ValueError:
        return ".git/worktree"


def _read(path: Path) -> str:
    try:
        return path.read_text(errors="replace").strip()
    except OSError:
        return ""


def _fingerprint(path: Path) -> str:
    """What a file is: content hash and executable bit, link target, or its kind. Only
    regular files are read (a FIFO would block)."""
    try:
        st = os.lstat(path)
    except OSError:
        return "gone"
    if stat.S_ISLNK(st.st_mode):
        try:
            return "link:" + os.readlink(path)
        except OSError:
            return "link:?"
    if stat.S_ISDIR(st.st_mode):
        return "dir"
    if not stat.S_ISREG(st.st_mode):
        return f"special:{stat.S_IFMT(st.st_mode):o}"
    try:
        data = path.read_bytes()
    except OSError:
        return "unreadable"
    executable = "x" if st.st_mode & stat.S_IXUSR else "-"
    return executable + hashlib.sha256(data).hexdigest()


def _entries(
    base: Path,
    *,
    prune: Iterable[str] = (),
    prune_top: Iterable[str] = (),
    skip: Iterable[str] = (),
) -> dict[str, Path]:
    """Every non-directory entry under ``base`` by relative POSIX path; directories named in
    ``prune`` (or in ``prune_top`` at the top) and files named in ``skip`` (and ``*.lock``)
    left out. Symlinked directories are entries, never entered."""
    pruned, pruned_top, skipped = set(prune), set(prune_top), set(skip)
    found: dict[str, Path] = {}
    if not base.is_dir() or base.is_symlink():
        return found
    for directory, dirnames, filenames in os.walk(base):
        here = Path(directory)
        dirnames[:] = [d for d in dirnames if d not in pruned and (here != base or d not in pruned_top)]
        for name in filenames + [d for d in dirnames if (here / d).is_symlink()]:
            if name in skipped or name.endswith(".lock"):
                continue
            full = here / name
            found[full.relative_to(base).as_posix()] = full
    return found


def _fingerprints(entries: Mapping[str, Path]) -> dict[str, str]:
    return {label: _fingerprint(full) for label, full in entries.items()}


def _tree(root: Path, *, skip_git_dir: bool) -> dict[str, str]:
    """The workspace's files; the root ``.git`` directory (a plain repository) is judged by
    the git snapshot instead, a worktree's ``.git`` file and nested ``.git`` are files here."""
    return _fingerprints(_entries(root, prune_top={".git"} if skip_git_dir else ()))


def _outside(root: Path) -> dict[str, Path]:
    """The workspace's parent, where ``../x`` lands; other runs' working copies (named by
    their run id, or any directory holding a ``.git``) come and go with them and are left out. A directory is
    listed as ``../name/`` besides its files, so an empty new one counts too."""
    parent = root.parent
    found: dict[str, Path] = {}
    try:
        names = os.listdir(parent)
    except OSError:
        return found
    for name in names:
        full = parent / name
        if full == root:
            continue
        if full.is_dir() and not full.is_symlink():
            if os.path.lexists(full / ".git") or _RUN_ID.match(name):
                continue  # another run's working copy, possibly being created or removed right now
            found[f"../{name}/"] = full
            found.update({f"../{name}/{rel}": entry for rel, entry in _entries(full).items()})
        else:
            found[f"../{name}"] = full
    return found
