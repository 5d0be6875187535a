"""No new git metadata from agents: a ``.git`` or a gitlink that appears below a root is refused.

A ``.git`` planted below the workspace (``vendor/.git`` with ``core.fsmonitor`` set) is a
configuration git would read there, and a gitlink in the index makes git look inside it.
Confined code writes where it likes in its workspace, so a :class:`GitMetaWatch` is taken
before it runs and removes and reports what is new after: a walk that re-reads only a
directory whose inode, mtime or ctime changed (confined code cannot set a ctime), and
``git ls-files --stage`` only when the index file may hold a gitlink.
"""

from __future__ import annotations

import os
import shutil
import time
from pathlib import Path

from attrs import frozen

from snodo.base.errors import PathValidationError
from snodo.git.runner import pinned, run_git

REASON_NEW_GIT = (
    "a new `.git` below the workspace (a nested repository git would read the configuration of) "
    "was created by confined code; it was removed"
)
REASON_NEW_GITLINK = "a new gitlink (a nested repository in the index) appeared; it was unstaged"
GITLINK_MODE = "160000"
# A Python environment is not entered: it holds thousands of directories, the sandbox keeps
# it read-only and the path guard refuses writes into it.
_ENV_MARKERS = frozenset({"pyvenv.cfg", "conda-meta"})


def is_git_name(name: str) -> bool:
    # `.GIT` is `.git` on a case-insensitive file system, `.git.` on Windows.
    return name[:1] == "." and name.casefold().rstrip(". ") == ".git"


@frozen
class _Dir:
    """One directory as the last scan saw it: its identity and times, and what it held."""

    key: tuple[int, int, int]  # inode, mtime, ctime (ns): a new or removed entry changes them
    children: tuple[str, ...]  # subdirectories entered (not links, not Python environments)
    gits: tuple[str, ...]  # its `.git` entries
    racy: bool  # changed too recently for its times to prove it unchanged next time


#: Directories whose ctime is this close to the scan may change again within the same
#: clock tick without their times showing it: they are read again on the next scan.
_RACY_NS = 2_000_000_000

#: The last scan of each root: the next scan reads only the directories that changed.
_SCANS: dict[Path, dict[str, _Dir]] = {}


def _scan(root: Path, before: dict[str, _Dir]) -> dict[str, _Dir]:
    """Every directory below ``root`` (``.git`` directories, links and Python environments
    not entered) with its ``.git`` entries; one whose key is that of ``before`` (not racy
    then) holds the same names and is not read again."""
    now = time.time_ns()
    seen: dict[str, _Dir] = {}
    stack = [str(root)]
    while stack:
        here = stack.pop()
        try:
            st = os.lstat(here)
        except OSError:
            continue
        key = (st.st_ino, st.st_mtime_ns, st.st_ctime_ns)
        old = before.get(here)
        if old is None or old.key != key or old.racy:
            old = _read_dir(here, key)
        entry = _Dir(key=key, children=old.children, gits=old.gits, racy=now - st.st_ctime_ns < _RACY_NS)
        seen[here] = entry
        stack.extend(entry.children)
    return seen


def _read_dir(here: str, key: tuple[int, int, int]) -> _Dir:
    try:
        with os.scandir(here) as listing:
            entries = list(listing)
    except OSError:
        return _Dir(key=key, children=(), gits=(), racy=True)
    return _entries_dir(key, entries)


def _entries_dir(key: tuple[int, int, int], entries: list[os.DirEntry[str]]) -> _Dir:
    # One pass per question, the cheap test first: this runs once per entry of the tree.
    names = [entry.name for entry in entries]
    environment = not _ENV_MARKERS.isdisjoint(names)
    gits = tuple(entry.path for entry in entries if entry.name[:1] == "." and is_git_name(entry.name))
    children: tuple[str, ...] = ()
    if not environment:
        children = tuple(
            entry.path
            for entry in entries
            if entry.is_dir(follow_symlinks=False) and not (entry.name[:1] == "." and is_git_name(entry.name))
        )
    return _Dir(key=key, children=children, gits=gits, racy=True)


def remember_walk(root: Path, walked: dict[str, tuple[tuple[int, int, int], list[os.DirEntry[str]]]]) -> None:
    """Take a walk another part of snodo made below ``root`` (each directory's key and
    entries) as the last scan, so the next :func:`git_entries` reads only what changed."""
    now = time.time_ns()
    scan: dict[str, _Dir] = {}
    for here, (key, entries) in walked.items():
        entry = _entries_dir(key, entries)
        scan[here] = _Dir(key=key, children=entry.children, gits=entry.gits, racy=now - key[2] < _RACY_NS)
    _SCANS[Path(os.path.realpath(root))] = scan


def git_entries(root: Path) -> set[str]:
    """Root-relative POSIX paths of every ``.git`` entry below ``root`` (``root/.git``
    included), reading only what changed since the last scan of ``root``."""
    real = Path(os.path.realpath(root))
    scan = _scan(real, _SCANS.get(real, {}))
    _SCANS[real] = scan
    top = len(str(real).rstrip("/")) + 1
    return {path[top:].replace(os.sep, "/") for entry in scan.values() for path in entry.gits}


#: How an index entry's mode field reads for a gitlink (0o160000) and for a sparse
#: directory entry (0o040000, which may stand for gitlinks below it): 32 bits, big-endian.
_GITLINK_BYTES = (0o160000).to_bytes(4, "big")
_SPARSE_DIR_BYTES = (0o040000).to_bytes(4, "big")


def _may_hold_gitlinks(root: Path) -> bool:
    """Whether the index of the pinned work tree ``root`` may hold a gitlink, without a
    process: no entry has the gitlink mode unless its four bytes occur in the file.
    ``True`` (ask git) whenever that cannot be said."""
    context = pinned(root)
    if context is None or context.work_tree != root:
        return True
    index = context.git_dir / "index"
    try:
        st = os.stat(index)
        if _NO_GITLINK.get(context.git_dir) == (st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns):
            return False  # the same index file as last time (git replaces it to change it)
        if any(name.startswith("sharedindex.") for name in os.listdir(context.git_dir)):
            return True
        with open(index, "rb") as fh:
            st = os.fstat(fh.fileno())
            stamp = (st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns)
            data = fh.read()
    except FileNotFoundError:
        return False  # no index yet: nothing staged at all
    except OSError:
        return True
    if data[:4] != b"DIRC" or _GITLINK_BYTES in data or _SPARSE_DIR_BYTES in data:
        return True
    _NO_GITLINK[context.git_dir] = stamp
    return False


#: Index files found to hold no gitlink, by git directory: (inode, size, mtime, ctime).
_NO_GITLINK: dict[Path, tuple[int, int, int, int]] = {}


def gitlinks(root: Path) -> set[str]:
    """Paths (as git names them, relative to ``root``) the index holds as gitlinks."""
    if not _may_hold_gitlinks(Path(os.path.realpath(root))):
        return set()
    result = run_git(root, "ls-files", "--stage", "-z", env={"GIT_OPTIONAL_LOCKS": "0"})
    if not result.ok:
        return set()
    found = set()
    for record in filter(None, result.stdout.split("\0")):
        meta, _, path = record.partition("\t")
        if meta.split(" ", 1)[0] == GITLINK_MODE:
            found.add(path)
    return found


class GitMetadataRefused(PathValidationError):
    """Confined code left new git metadata behind (already removed): ``found`` holds each
    ``(path, reason)``; the call or run it came from is refused."""

    def __init__(self, found: list[tuple[str, str]]) -> None:
        super().__init__(found[0][0], found[0][1])
        self.found = tuple(found)
        shown = ", ".join(path for path, _ in self.found[:5])
        self.message = f"refused: confined code created git metadata ({shown}); {REASON_NEW_GIT}"
        self.args = (self.message,)


class GitMetaWatch:
    """What git metadata a workspace holds now; :meth:`intruders` finds (and undoes) what
    appears later."""

    def __init__(self, root: Path, *, throwaway: bool = False) -> None:
        """``throwaway``: a private copy nobody runs git in again; only new ``.git`` entries
        are looked for, and its scan is not kept."""
        self.root = Path(os.path.realpath(root))
        self.index = not throwaway
        self.entries = git_entries(self.root)
        self.links = gitlinks(self.root) if self.index else set()
        self._found: list[tuple[str, str]] | None = None

    def intruders(self) -> list[tuple[str, str]]:
        """``(path, reason)`` for each new ``.git`` entry (removed) or gitlink (unstaged)."""
        found: list[tuple[str, str]] = []
        for rel in sorted(git_entries(self.root) - self.entries):
            _remove(self.root / rel)
            found.append((rel, REASON_NEW_GIT))
        if not self.index:
            _SCANS.pop(self.root, None)
        new_links = gitlinks(self.root) - self.links if self.index else set()
        for rel in sorted(new_links):
            run_git(self.root, "rm", "--cached", "-q", "--", rel, env={"GIT_LITERAL_PATHSPECS": "1"})
            found.append((rel, REASON_NEW_GITLINK))
        return found

    def found(self) -> list[tuple[str, str]]:
        """What :meth:`intruders` found, run once and remembered."""
        if self._found is None:
            self._found = self.intruders()
        return self._found

    def check(self) -> None:
        """Raise :class:`GitMetadataRefused` if :meth:`found` holds anything."""
        if self.found():
            raise GitMetadataRefused(self.found())


def _remove(path: Path) -> None:
    try:
        if path.is_dir() and not path.is_symlink():
            shutil.rmtree(path, ignore_errors=True)
        else:
            path.unlink(missing_ok=True)
    except OSError:
        pass
