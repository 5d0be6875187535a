"""One snapshot per validation, a private copy per validator with a ``.git`` snodo writes (docs/security.md)."""

from __future__ import annotations

import contextlib
import fcntl
import os
import re
import secrets
import shutil
import sys
import tempfile
import threading
import time
from pathlib import Path

from attrs import frozen

from snodo.base.errors import EnvironmentProblem
from snodo.git.runner import pin, read_objects, run_git

from .tree import FILE_MODES, Blobs, Entry, entries, safe_path, tree_names, write_copy, write_file

#: Python environments at the top of a checkout, linked into each copy (``.venv/bin/tool`` works).
ENVIRONMENTS = (".venv", "venv")

_NAME = re.compile(r"[^A-Za-z0-9_.-]+")
#: A path of a tree and its new entry (``None``: gone).
Change = tuple[str, Entry | None]
#: Judged trees kept per repository (``<git common dir>/snodo/judged/<n>``), one per concurrent run.
SLOTS = 2
#: Where snodo kept them while their index was not split: an older snodo's, removed once free.
_OLD_TREES = "trees"
_OLD_TREES_IDLE = 24 * 3600
#: A shared index is named by no index but the one it was written for: the others expire at once.
_INDEX_SETTINGS = (
    "index.version=2",
    "index.sparse=false",
    "splitIndex.maxPercentChange=20",
    "splitIndex.sharedIndexExpire=now",
)


@frozen
class Copy:
    """Where one validator judges: ``path`` (with ``upper``: the kept tree, writes overlaid); ``own`` removed after."""

    path: Path
    own: Path | None = None
    upper: Path | None = None
    work: Path | None = None

    @property
    def writes(self) -> Path:
        return self.upper or self.path


class Snapshot:
    """The judged ``tree`` of ``repo`` for each validator: kept between snapshots (patched), its blobs read once."""

    def __init__(self, repo: Path, tree: str, *, base: str | None, project_root: Path | None = None) -> None:
        self.repo = repo
        self.tree = tree
        self.base = base
        self.project_root = project_root or repo
        context = pin(repo)
        if context is None:
            raise EnvironmentProblem(f"{repo} is not in a git repository: no snapshot of {tree} can be made")
        self._common = context.common_dir()
        self.root = Path(tempfile.mkdtemp(prefix="snodo-snapshot-"))
        self._lock = threading.RLock()  # `shared` makes its copy while holding it
        self._shared: Path | None = None
        self._slot: _Slot | None = None
        self._files: dict[str, Entry] | None = None
        try:
            self.blobs = _blobs_for(repo, self._common)
            self._hooks_path = self._hooks_setting()
            self._hooks = self._project_hooks() if not self._hooks_path else {}
            _drop_old_trees(self._common / "snodo" / _OLD_TREES)
            self._slot = _Slot.lease(self._common / "snodo" / "judged", tree)
            changes = self._slot.changes(self) if self._slot is not None else None
            if self._slot is not None and changes is None:  # written whole: every blob, in the same batch
                wanted = [entry.sha for entry in self.files.values()]
            else:
                wanted = [entry.sha for _, entry in changes or () if entry is not None]
            top = self._read_top(wanted)
            self.environments: dict[str, Path] = {
                env: Path(os.path.realpath(self.project_root / env))
                for env in ENVIRONMENTS
                if env not in top and (self.project_root / env / "pyvenv.cfg").is_file()
            }
            if self._slot is not None:
                self._slot.hold(self, changes)
        except BaseException:
            self.close()
            raise

    def _read_top(self, blobs: list[str]) -> set[str]:
        found = read_objects(self.repo, [self.tree, *blobs])
        root = found.get(self.tree)
        if root is None or root.kind != "tree":
            raise EnvironmentProblem(f"tree {self.tree} is missing from {self.repo}")
        self.blobs.put({sha: found[sha] for sha in blobs})
        return set(tree_names(root.data, len(self.tree) // 2))

    @property
    def files(self) -> dict[str, Entry]:
        with self._lock:
            if self._files is None:
                self._files = entries(self.repo, self.tree)
            return self._files

    def _hooks_setting(self) -> str:
        """``core.hooksPath`` as the repository sets it (not snodo's command-line override)."""
        found = run_git(self.repo, "config", "--show-scope", "--get-all", "core.hooksPath")
        values = [line.partition("\t")[2] for line in found.stdout.splitlines() if not line.startswith("command\t")]
        return values[-1].strip() if found.ok and values else ""

    def _project_hooks(self) -> dict[str, tuple[bytes, int]]:
        out: dict[str, tuple[bytes, int]] = {}
        with contextlib.suppress(OSError):
            for entry in os.scandir(self._common / "hooks"):
                if entry.name.endswith(".sample") or not entry.is_file(follow_symlinks=True):
                    continue
                with contextlib.suppress(OSError):
                    mode = entry.stat().st_mode & 0o755
                    out[entry.name] = (Path(entry.path).read_bytes(), mode)
        return out

    def copy(self, name: str, *, overlay: bool = False) -> Copy:
        """A private copy of the tree; with ``overlay`` (bubblewrap) the kept tree, its writes apart."""
        own = self._private(name)
        if overlay and self._slot is not None:
            (own / "upper").mkdir()
            (own / "ovl").mkdir()
            return Copy(self._slot.work, own=own, upper=own / "upper", work=own / "ovl")
        dest = own / "work"
        dest.mkdir()
        write_copy(dest, self.files, self.blobs)
        self._lay_out(dest)
        return Copy(dest, own=own)

    def _lay_out(
        self, dest: Path, kept: bool = False, changes: list[Change] | None = None, split: bool = False
    ) -> None:
        """``dest``'s ``.git``, its index and environments. The index is read from the tree, or
        is the one ``dest`` holds, ``kept`` (of the tree before ``changes``), with just those
        entries staged; ``split`` (the kept tree's): a write of it writes only what changed."""
        self._git_dir(dest, keep_index=kept)
        pairs = (*_INDEX_SETTINGS, f"core.splitIndex={'true' if split else 'false'}")
        settings = [f"--git-dir={dest / '.git'}", *(arg for pair in pairs for arg in ("-c", pair))]
        own = {"GIT_INDEX_FILE": str(dest / ".git" / "index")}
        made = None
        if not kept:
            made = run_git(self.repo, *settings, "read-tree", self.tree, env=own)
        else:
            if changes:  # what is gone first: a path may turn from a file into a directory
                gone = "".join(f"0 {'0' * len(self.tree)}\t{path}\0" for path, entry in changes if entry is None)
                new = "".join(f"{entry.mode} {entry.sha}\t{path}\0" for path, entry in changes if entry is not None)
                info = ("update-index", "-z", "--add", "--replace", "--index-info")
                made = run_git(self.repo, *settings, *info, stdin=gone + new, env=own)
            if made is not None and not made.ok:  # an index git cannot read (its shared one gone): read anew
                for name in filter(_index_file, os.listdir(dest / ".git")):
                    os.unlink(dest / ".git" / name)
                made = run_git(self.repo, *settings, "read-tree", self.tree, env=own)
        if made is not None and not made.ok:
            raise EnvironmentProblem(f"cannot read tree {self.tree} into an index in {self.repo}: {made.detail()}")
        for env in ENVIRONMENTS:
            if env not in self.environments and os.path.islink(dest / env):
                os.unlink(dest / env)
        for env, real in self.environments.items():
            if not os.path.lexists(dest / env):
                os.symlink(real, dest / env)

    def _git_dir(self, dest: Path, *, keep_index: bool = False) -> None:
        """``dest/.git`` laid out anew; ``keep_index``: the index files of the one snodo laid out stay."""
        git = dest / ".git"
        if keep_index:
            for entry in os.scandir(git):
                if not _index_file(entry.name):
                    if entry.is_dir(follow_symlinks=False):
                        _remove_tree(Path(entry.path))
                    else:
                        os.unlink(entry.path)
        elif os.path.lexists(git):  # the tree holds a `.git` entry of its own: never trusted, replaced
            if git.is_dir() and not git.is_symlink():
                shutil.rmtree(git)
            else:
                git.unlink()
        for sub in ("objects/info", "refs/heads", "refs/tags", "hooks", "info"):
            (git / sub).mkdir(parents=True, exist_ok=keep_index)
        (git / "objects" / "info" / "alternates").write_text(f"{self._common / 'objects'}\n", encoding="utf-8")
        sha256 = len(self.tree) == 64
        config = ["[core]", f"\trepositoryformatversion = {1 if sha256 else 0}", "\tfilemode = true", "\tbare = false"]
        if self._hooks_path:
            config.append(f"\thooksPath = {_quoted(self._hooks_path)}")
        if sha256:
            config += ["[extensions]", "\tobjectformat = sha256"]
        (git / "config").write_text("\n".join(config) + "\n", encoding="utf-8")
        (git / "HEAD").write_text(f"{self.base}\n" if self.base else "ref: refs/heads/main\n", encoding="utf-8")
        for hook, (data, mode) in self._hooks.items():
            target = git / "hooks" / hook
            target.write_bytes(data)
            target.chmod(mode)

    def kept(self) -> Path | None:
        return self._slot.work if self._slot is not None else None

    def shared(self) -> Copy:
        """The copy read-only validators share: the kept tree, else one made on the first ask."""
        with self._lock:
            if self._slot is not None:
                return Copy(self._slot.work)
            if self._shared is None:
                self._shared = self.copy("shared").path
            return Copy(self._shared)

    def empty(self) -> Path:
        """A workspace for a validator that runs no code: a process it starts cannot write the shared copy."""
        return self._private("empty")

    def _private(self, name: str) -> Path:
        return Path(tempfile.mkdtemp(prefix=f"{_NAME.sub('_', name)[:60]}-", dir=self.root))  # mode 0700

    def remove(self, copy: Copy) -> None:
        if copy.own is not None:
            _discard(copy.own)

    def close(self) -> None:
        slot = getattr(self, "_slot", None)
        if slot is not None:
            slot.release()
        _discard(self.root)
        blobs = getattr(self, "blobs", None)
        if blobs is not None and blobs.size() > _KEEP_BYTES:
            with _CACHE_LOCK:
                if _LAST_BLOBS.get(self._common) is blobs:
                    del _LAST_BLOBS[self._common]


_CACHE_LOCK = threading.Lock()
#: The blobs the last snapshot of a repository read, kept (up to :data:`_KEEP_BYTES`) for the next.
_LAST_BLOBS: dict[Path, Blobs] = {}
_KEEP_BYTES = 64 << 20


def _blobs_for(repo: Path, common: Path) -> Blobs:
    with _CACHE_LOCK:
        kept = _LAST_BLOBS.pop(common, None)
        _LAST_BLOBS.clear()
        blobs = kept if kept is not None and kept.size() <= _KEEP_BYTES else Blobs(repo)
        blobs.repo = repo
        _LAST_BLOBS[common] = blobs
    return blobs


def _index_file(name: str) -> bool:
    """Whether ``name`` in a ``.git`` is part of its index: the index, or a shared index a split one names."""
    return name == "index" or name.startswith("sharedindex.")


def _drop_old_trees(old: Path) -> None:
    """Remove the judged trees an older snodo kept (it would rebuild a split index without
    its shared one), each once no run holds it nor used it for a day."""
    for home in list(old.iterdir()) if os.path.isdir(old) else ():
        with contextlib.suppress(OSError):
            fd = os.open(home / "lock", os.O_RDWR | os.O_NOFOLLOW)
            try:
                if time.time() - os.stat(home / "state").st_mtime < _OLD_TREES_IDLE:
                    continue
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                os.replace(home, gone := old.with_name(f"{old.name}.{home.name}.{secrets.token_hex(4)}"))
            finally:
                os.close(fd)  # renamed while locked: the older snodo skips it, or makes a new one
            _discard(gone)
    with contextlib.suppress(OSError):
        old.rmdir()


def _discard(path: Path) -> None:
    """Remove ``path`` in the background (not a daemon: the process waits for it at exit)."""
    threading.Thread(target=_remove_tree, args=(path,), name="snodo-discard").start()


def _remove_tree(path: Path) -> None:
    """``rmtree``, also of what an overlay left: its work directory without permissions."""

    def retry(function: object, failed: str, *_: object) -> None:
        with contextlib.suppress(OSError):
            os.chmod(os.path.dirname(failed), 0o700)
            if os.path.isdir(failed) and not os.path.islink(failed):
                os.chmod(failed, 0o700)
                shutil.rmtree(failed, ignore_errors=True)
            else:
                os.unlink(failed)

    if sys.version_info >= (3, 12):
        shutil.rmtree(path, onexc=retry)
    else:
        shutil.rmtree(path, onerror=retry)


class _Slot:
    """A judged tree kept between runs in the git directory, patched by the next snapshot."""

    def __init__(self, home: Path, fd: int) -> None:
        self.home = home
        self.work = home / "work"
        self.fd = fd
        try:  # `state` names the tree `work` holds, or `dirty` while snodo changes it
            self.held = (home / "state").read_text(encoding="ascii").strip()
            self.used = os.stat(home / "state").st_mtime_ns
        except (OSError, UnicodeDecodeError):
            self.held, self.used = "", 0

    @classmethod
    def lease(cls, trees: Path, tree: str) -> _Slot | None:
        """A free slot, the one holding ``tree`` first; ``None`` when none is free or can be made."""
        free: list[_Slot] = []
        try:
            trees.mkdir(mode=0o700, parents=True, exist_ok=True)
            for n in range(SLOTS):
                home = trees / str(n)
                home.mkdir(mode=0o700, exist_ok=True)
                fd = os.open(home / "lock", os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW, 0o600)
                try:
                    fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                except OSError:
                    os.close(fd)
                    continue
                free.append(cls(home, fd))
        except OSError:
            for slot in free:
                slot.release()
            return None
        if not free:
            return None
        # the one holding the tree; else the one used least recently, so that the base's tree,
        # judged before every run's work, stays where the next run finds it
        free.sort(key=lambda s: (s.held != tree, s.used))
        for extra in free[1:]:
            extra.release()
        return free[0]

    def changes(self, snapshot: Snapshot) -> list[Change] | None:
        """Each path that differs from the tree held, with its new entry (``None``: gone); ``None``: write it whole."""
        if self.held in ("", "dirty") or not self.work.is_dir():
            return None
        if self.held == snapshot.tree:
            return []
        found = run_git(snapshot.repo, "diff-tree", "-r", "-z", "--no-renames", self.held, snapshot.tree)
        if not found.ok:
            return None
        fields = found.stdout.split("\0")
        out: list[Change] = []
        for meta, path in zip(fields[0::2], fields[1::2], strict=False):
            parts = meta.split(" ")
            if len(parts) != 5 or not path:
                return None
            top = path.split("/", 1)[0]
            if top in ENVIRONMENTS or top.casefold().rstrip(". ") == ".git":
                return None
            mode, sha = parts[1], parts[3]
            if mode not in FILE_MODES and mode != "000000":
                return None  # a gitlink: the index patched in place would need it, the files not
            out.append((path, Entry(mode, sha) if mode in FILE_MODES else None))
        return out

    def hold(self, snapshot: Snapshot, changes: list[Change] | None) -> None:
        """Make ``work`` hold ``snapshot``'s tree: ``changes`` patched in, or written afresh (``None``)."""
        state = self.home / "state"  # written in place: cut short, it names no tree git knows, or the same
        state.write_text("dirty\n", encoding="ascii")
        index = self.work / ".git" / "index"  # of the tree held, in the `.git` snodo laid out
        kept = changes is not None and not index.parent.is_symlink() and index.is_file() and not index.is_symlink()
        if changes is None:
            if os.path.lexists(self.work):
                _remove_tree(self.work)
            self.work.mkdir(mode=0o700)
            write_copy(self.work, snapshot.files, snapshot.blobs)
        else:
            _patch(self.work, changes, snapshot.blobs)
        snapshot._lay_out(self.work, kept, changes, split=True)
        state.write_text(snapshot.tree + "\n", encoding="ascii")
        self.held = snapshot.tree

    def release(self) -> None:
        if self.fd >= 0:
            with contextlib.suppress(OSError):
                os.close(self.fd)  # the lock goes with it
            self.fd = -1


def _patch(work: Path, changes: list[Change], blobs: Blobs) -> None:
    """Bring ``work`` to the new tree: remove what is gone or replaced, write what is new (as :func:`write_copy`)."""
    real = os.path.realpath(work)
    emptied: set[str] = set()
    for path, _ in sorted(changes, reverse=True):
        target = os.path.join(real, path)
        if not safe_path(path) or not _plain(real, path):
            continue
        if os.path.lexists(target) and not (os.path.isdir(target) and not os.path.islink(target)):
            os.unlink(target)
            emptied.add(os.path.dirname(target))
    for parent in sorted(emptied, key=len, reverse=True):
        here = parent
        with contextlib.suppress(OSError):  # not empty: its parents are not either
            while here != real and here.startswith(real + os.sep):
                os.rmdir(here)
                here = os.path.dirname(here)
    for path, entry in sorted((p, e) for p, e in changes if e is not None):
        target = os.path.join(real, path)
        if not safe_path(path) or not _plain(real, path, make=True):
            continue
        if os.path.isdir(target) and not os.path.islink(target):
            _remove_tree(Path(target))
        write_file(Path(target), entry, blobs)


def _plain(root: str, path: str, *, make: bool = False) -> bool:
    """Whether every directory on the way to ``root/path`` is real (``make``: made if missing)."""
    here = root
    for part in path.split("/")[:-1]:
        here = os.path.join(here, part)
        if make and not os.path.lexists(here):
            os.mkdir(here)
        if os.path.islink(here) or not os.path.isdir(here):
            return False
    return True


def _quoted(value: str) -> str:
    escaped = value.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n").replace("\t", "\\t")
    return f'"{escaped}"'
