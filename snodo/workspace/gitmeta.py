"""No new git metadata from agents: a ``.git`` (a configuration git would read, e.g.
``vendor/.git`` with ``core.fsmonitor``) or a gitlink (git looks inside it) that confined code
left below a root is removed and reported by a :class:`GitMetaWatch` taken before it ran. The
walk re-reads only directories whose inode, mtime or ctime changed (confined code cannot set a
ctime); ``git ls-files --stage`` runs only when the index file may hold a gitlink.
"""

from __future__ import annotations

import contextlib
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
# A Python environment is not entered: it is large, read-only in the sandbox and guarded.
_ENV_MARKERS = frozenset({"pyvenv.cfg", "conda-meta"})


def is_git_name(name: str) -> bool:
    # `.GIT` is `.git` on a case-insensitive file system, `.git.` on Windows.
    return name[:1] == "." and name.casefold().rstrip(". ") == ".git"


@frozen
class DirScan:
    """One directory as a walk saw it."""

    key: tuple[int, int, int]  # inode, mtime, ctime (ns): a new or removed entry changes them
    children: tuple[str, ...]  # subdirectories (not links, not `.git`)
    gits: tuple[str, ...]  # its `.git` entries
    environment: bool  # holds a Python environment: not searched (large, read-only in the sandbox and guarded)
    racy: bool  # changed too recently (within a clock tick) for its times to prove it unchanged next time


_RACY_NS = 2_000_000_000

#: The last scan of each root: the next scan reads only the directories that changed.
_SCANS: dict[Path, dict[str, DirScan]] = {}


def _scan(root: Path, before: dict[str, DirScan]) -> dict[str, DirScan]:
    """Every directory below ``root`` with its ``.git`` entries; one whose key is that of
    ``before`` (not racy then) is not read again."""
    now = time.time_ns()
    seen: dict[str, DirScan] = {}
    stack = [str(root)]
    while stack:
        here = stack.pop()
        try:
            st = os.lstat(here)
        except OSError:
            continue
        key = (st.st_ino, st.st_mtime_ns, st.st_ctime_ns)
        entry = before.get(here)
        if entry is None or entry.key != key or entry.racy:
            entry = _read_dir(here, key, now)
        seen[here] = entry
        if not entry.environment:
            stack.extend(entry.children)
    return seen


def _read_dir(here: str, key: tuple[int, int, int], now: int) -> DirScan:
    try:
        with os.scandir(here) as listing:
            return scanned(key, list(listing), now)
    except OSError:
        return scanned(key, [], now)


def scanned(key: tuple[int, int, int], entries: list[os.DirEntry[str]], now: int) -> DirScan:
    """The record of a directory with ``key`` and ``entries``, read at ``now`` (ns)."""
    # One pass per question, the cheap test first: this runs once per entry read.
    names = [entry.name for entry in entries]
    gits = tuple(entry.path for entry in entries if entry.name[:1] == "." and is_git_name(entry.name))
    children = tuple(
        entry.path
        for entry in entries
        if entry.is_dir(follow_symlinks=False) and not (entry.name[:1] == "." and is_git_name(entry.name))
    )
    environment = not _ENV_MARKERS.isdisjoint(names)
    return DirScan(key=key, children=children, gits=gits, environment=environment, racy=now - key[2] < _RACY_NS)


def remember_walk(root: Path, walked: dict[str, DirScan]) -> None:
    """Take a walk another part of snodo made below ``root`` as the last scan, so the next
    :func:`git_entries` reads only what changed."""
    _SCANS[Path(os.path.realpath(root))] = dict(walked)


def git_entries(root: Path) -> set[str]:
    """Root-relative paths of every ``.git`` entry below ``root`` (``root/.git`` included)."""
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
    """Whether the index of the pinned work tree ``root`` may hold a gitlink, without a process
    (no entry has the gitlink mode unless its four bytes occur in the file, or in a shared
    index a split one names); ``True``: ask git."""
    context = pinned(root)
    if context is None or context.work_tree != root:
        return True
    index = context.git_dir / "index"
    try:
        st = os.stat(index)
        if _NO_GITLINK.get(context.git_dir) == (st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns):
            return False  # the same index file as last time (git replaces it to change it)
        with open(index, "rb") as fh:
            st = os.fstat(fh.fileno())
            stamp = (st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns)
            data = [fh.read()]
    except FileNotFoundError:
        return False  # no index yet: nothing staged at all
    except OSError:
        return True
    try:  # read after the index: git writes the shared index a split one names before it
        shared = [name for name in os.listdir(context.git_dir) if name.startswith("sharedindex.")]
        data += [(context.git_dir / name).read_bytes() for name in shared[:_SHARED_READ]]
    except OSError:
        return True
    if len(shared) > _SHARED_READ or any(
        b[:4] != b"DIRC" or _GITLINK_BYTES in b or _SPARSE_DIR_BYTES in b for b in data
    ):
        return True
    _NO_GITLINK[context.git_dir] = stamp  # a shared index is named by its content: the same one still
    return False


#: Index files found to hold no gitlink, by git directory: (inode, size, mtime, ctime).
_NO_GITLINK: dict[Path, tuple[int, int, int, int]] = {}
#: Shared index files read at most; beyond, git is asked.
_SHARED_READ = 4


def gitlinks(root: Path) -> set[str]:
    """Paths (as git names them, relative to ``root``) the index holds as gitlinks."""
    if not _may_hold_gitlinks(Path(os.path.realpath(root))):
        return set()
    result = run_git(root, "ls-files", "--stage", "-z", env={"GIT_OPTIONAL_LOCKS": "0"})
    return {path for path, _ in gitlink_entries(result.stdout)} if result.ok else set()


def gitlink_entries(listing: str, sha_field: int = 1) -> set[tuple[str, str]]:
    """``(path, sha)`` of each gitlink in a ``-z`` listing of ``ls-files -s`` (``ls-tree``: ``sha_field`` 2)."""
    records = (record.partition("\t") for record in listing.split("\0") if record)
    return {(path, meta.split()[sha_field]) for meta, _, path in records if meta.split(" ", 1)[0] == GITLINK_MODE}


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
    """What git metadata a workspace holds now; :meth:`intruders` finds (and undoes) what appears later.
    ``throwaway``: a private copy nobody runs git in again (new ``.git`` entries only, its scan not kept)."""

    def __init__(self, root: Path, *, throwaway: bool = False) -> None:
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
        """:meth:`intruders`, run once."""
        if self._found is None:
            self._found = self.intruders()
        return self._found

    def check(self) -> None:
        if self.found():
            raise GitMetadataRefused(self.found())


def _remove(path: Path) -> None:
    with contextlib.suppress(OSError):
        if path.is_dir() and not path.is_symlink():
            shutil.rmtree(path, ignore_errors=True)
        else:
            path.unlink(missing_ok=True)
