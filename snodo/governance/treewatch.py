"""A work tree's ``git status``, re-read only after something in it changed (issue 26).

A long-lived server validates the same checkout again and again, and the pytest validator
reports the checkout's uncommitted changes with every verdict: one ``git status`` process
per call (~2-4 ms here), although the tree mostly did not change in between. This is what
git's own fsmonitor does, without letting the work tree name a program: the kernel
(inotify) reports every change to a directory git reads, and the last answer is reused
only while none came.

Sound by construction, and refusing whenever it cannot be:

* watches are in place *before* the ``git status`` whose answer is kept; an answer read
  while a directory was still unwatched (a new directory, the first read) is used once and
  not kept. Every change after the read invalidates it, when the next caller drains the
  events; a lost event (queue overflow) invalidates it too;
* watched: every directory of the work tree git looks at (not those it reports ignored,
  whose content it never reads), the repository's git directories (``HEAD``, the index,
  ``config``, ``info/``, ``refs/``), and the user's global git configuration (``$HOME``,
  ``$HOME/.config/git``); a configuration that points outside them (``include``,
  ``core.excludesFile``) turns the cache off, as does a file system whose changes may not
  all reach inotify (anything but the local ones in :data:`LOCAL_FS`);
* the one change known not to alter the answer is the content of a file git already
  reports untracked or ignored (``??``/``!!``, itself or a directory above it): snodo's own
  audit log in ``.snodo/`` is appended on every call. Not when that file is also a tracked
  one under another name (a hard link: more than one link) or its name was created,
  removed or renamed meanwhile; a directory moved or removed makes everything be watched
  anew;
* not seen by inotify: writes through a shared memory mapping, and writes through a hard
  link placed inside a directory git ignores (those are not watched). A tracked file
  changed only that way is missing from the list until the next change; the verdict
  still judges the files as they are (the list is a report, not the judging).

Linux only; anywhere else, or when inotify is refused (no watches left), every read is a
``git status``, exactly as without it.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import stat
import struct
import sys
import threading
from collections.abc import Callable, Iterable
from pathlib import Path

from snodo.base.errors import EnvironmentProblem
from snodo.git.runner import pinned, run_git
from snodo.gitconfig import config_files

#: File systems on which every change made on this machine reaches inotify.
LOCAL_FS = frozenset({"ext2", "ext3", "ext4", "xfs", "btrfs", "tmpfs", "f2fs", "overlay", "zfs", "bcachefs"})
#: More directories than this and the tree is re-read with git every time.
MAX_WATCHES = 4096

_IN_MODIFY, _IN_ATTRIB, _IN_CLOSE_WRITE = 0x2, 0x4, 0x8
_IN_MOVED_FROM, _IN_MOVED_TO, _IN_CREATE, _IN_DELETE = 0x40, 0x80, 0x100, 0x200
_IN_DELETE_SELF, _IN_MOVE_SELF, _IN_Q_OVERFLOW, _IN_IGNORED = 0x400, 0x800, 0x4000, 0x8000
_IN_ONLYDIR, _IN_DONT_FOLLOW, _IN_ISDIR = 0x01000000, 0x02000000, 0x40000000
_MASK = (_IN_MODIFY | _IN_ATTRIB | _IN_CLOSE_WRITE | _IN_MOVED_FROM | _IN_MOVED_TO | _IN_CREATE | _IN_DELETE) | (
    _IN_DELETE_SELF | _IN_MOVE_SELF | _IN_ONLYDIR | _IN_DONT_FOLLOW
)
#: Events that change a file's content or metadata but not which files exist.
_CONTENT_ONLY = _IN_MODIFY | _IN_ATTRIB | _IN_CLOSE_WRITE
_EVENT = struct.Struct("iIII")


def _libc() -> ctypes.CDLL | None:
    if not sys.platform.startswith("linux"):
        return None
    try:
        # the process's own symbols, libc's among them (finding libc by name starts a process)
        return ctypes.CDLL(None, use_errno=True)
    except OSError:
        return None


def _fs_type(path: Path) -> str:
    """The type of the file system ``path`` is on (the longest mount point above it)."""
    best, kind = "", ""
    real = os.path.realpath(path)
    try:
        with open("/proc/self/mounts", encoding="utf-8", errors="replace") as mounts:
            for line in mounts:
                fields = line.split()
                if len(fields) < 3:
                    continue
                point = fields[1].replace("\\040", " ")
                inside = real == point or real.startswith(point.rstrip("/") + "/")
                if inside and len(point) >= len(best):
                    best, kind = point, fields[2]
    except OSError:
        return ""
    return kind


def _inotify(tree: Path) -> tuple[ctypes.CDLL, int] | str:
    """A non-blocking inotify descriptor (and the C library to add watches with) for the tree
    at ``tree``, or why there is none: no inotify here, or a file system whose changes may not
    all reach it."""
    libc = _libc()
    if libc is None:
        return "no inotify on this system"
    kind = _fs_type(tree)
    if kind not in LOCAL_FS:
        return f"the work tree is on a {kind or 'unknown'} file system"
    try:
        fd = int(libc.inotify_init1(os.O_NONBLOCK | os.O_CLOEXEC))
    except AttributeError:  # a C library without inotify
        return "no inotify on this system"
    if fd < 0:
        return f"inotify refused: {os.strerror(ctypes.get_errno())}"
    return libc, fd


def _points_elsewhere(config: Path) -> bool:
    """Whether a git configuration file may make git read files outside what is watched."""
    try:
        text = config.read_text(encoding="utf-8", errors="replace").lower()
    except FileNotFoundError:
        return False
    except OSError:
        return True
    return "include" in text or "excludesfile" in text


class StatusWatch:
    """``git status --porcelain`` of one work tree (the lines :func:`read` returns), kept
    between calls while inotify reports no change; see the module's documentation."""

    def __init__(self, workspace: Path, read: Callable[[Path], tuple[str, ...] | None] | None = None) -> None:
        self.workspace = Path(os.path.realpath(workspace))
        self._read = read or read_status
        self._lock = threading.Lock()
        self._fd = -1
        self._libc: ctypes.CDLL | None = None
        self._dirs: dict[int, str] = {}  # watch descriptor -> path relative to the work tree ("" top)
        self._extra: set[int] = set()  # watches outside the work tree (git dirs, global config)
        self._top = self.workspace
        self._lines: tuple[str, ...] | None = None  # the kept answer, ignored paths included
        self._shown: tuple[str, ...] = ()  # the same without them
        self._ignored: tuple[str, ...] = ()
        self._primed = False
        self._reset = False  # a directory moved: watch everything again
        self._off = ""  # why the cache is off ("" while it works)
        self.reads = 0  # git status processes started (tests and benchmarks count them)

    def uncommitted(self) -> tuple[str, ...]:
        """The work tree's uncommitted changes now, as ``git status --porcelain`` lists them."""
        with self._lock:
            if not self._off and self._fd < 0:
                self._start()  # once: a cache turned off stays off
            if not self._off and self._drain() and self._lines is not None:
                return self._shown
            self._lines = None
            if self._reset and not self._off:
                self._restart()
            if self._off and self._fd >= 0:  # turned off: give the watches back
                os.close(self._fd)
                self._fd = -1
            if self._off or self._config_points_elsewhere():
                return _visible(self._git() or ())
            if not self._primed:  # first learn what git ignores, so as not to watch it
                first = self._git()
                self._primed = first is not None
                self._watch_git()
                self._watch_tree()
                return _visible(first or ())
            complete = self._watch_git() and self._watch_tree()
            self._drain()  # what happened before this read is in it
            lines = self._git()
            # a directory first seen now was not watched while git read it: use it, keep nothing
            if lines is not None and self._watch_tree() and complete and not (self._off or self._reset):
                self._lines, self._shown = lines, _visible(lines)
            return _visible(lines or ())

    def close(self) -> None:
        with self._lock:
            if self._fd >= 0:
                os.close(self._fd)
            self._fd, self._lines = -1, None
            self._off = self._off or "closed"

    # ----------------------------------------------------------------- internals

    def _git(self) -> tuple[str, ...] | None:
        self.reads += 1
        lines = self._read(self.workspace)
        if lines is not None:
            self._ignored = tuple(line[3:] for line in lines if line.startswith("!! ") and line.endswith("/"))
        return lines

    def _start(self) -> None:
        opened = _inotify(self.workspace)
        if isinstance(opened, str):
            self._off = opened
            return
        self._libc, self._fd = opened

    def _restart(self) -> None:
        os.close(self._fd)
        self._fd, self._reset = -1, False
        self._dirs.clear()
        self._extra.clear()
        self._start()

    def _add(self, path: str) -> int:
        assert self._libc is not None
        wd = int(self._libc.inotify_add_watch(self._fd, os.fsencode(path), _MASK))
        if wd < 0:
            errno = ctypes.get_errno()
            if errno not in (2, 20):  # ENOENT, ENOTDIR: gone meanwhile, the event says so
                self._off = f"inotify refused a watch on {path}: {os.strerror(errno)}"
        return wd

    def _watch_git(self) -> bool:
        """Watch the git directories and the global configuration; False if not all could be."""
        context = pinned(self.workspace)
        if context is None:
            self._off = "not a git work tree snodo has pinned"
            return False
        self._top = Path(os.path.realpath(context.work_tree))
        common = context.common_dir()
        home = Path(os.environ.get("HOME", "/nonexistent"))
        places = [context.git_dir, common, common / "info", home, home / ".config", home / ".config" / "git"]
        refs = [str(common / "refs")]
        for top, dirs, _files in os.walk(common / "refs"):
            refs.extend(os.path.join(top, d) for d in dirs)
        for place in [*map(str, places), *refs]:
            if os.path.isdir(place) and (wd := self._add(place)) >= 0:
                self._extra.add(wd)
        return not self._off

    def _config_points_elsewhere(self) -> bool:
        context = pinned(self.workspace)
        if context is None:  # not pinned before the first read, whose answer is not kept
            return False
        return any(_points_elsewhere(Path(c)) for c in config_files(context.git_dir, context.common_dir()))

    def _watch_tree(self) -> bool:
        """Watch every directory git reads; True if none was new."""
        known = set(self._dirs.values())
        new = False
        skip = {".git", *(d.rstrip("/") for d in self._ignored)}
        for top, dirs, _files in os.walk(self._top):
            rel = os.path.relpath(top, self._top)
            rel = "" if rel == "." else rel
            dirs[:] = [d for d in dirs if os.path.join(rel, d) not in skip and d != ".git"]
            if rel not in known:
                new = True
                wd = self._add(top)
                if wd >= 0:
                    self._dirs[wd] = rel
            if len(self._dirs) > MAX_WATCHES:
                self._off = f"more than {MAX_WATCHES} directories to watch"
            if self._off:
                return False
        return not new

    def _drain(self) -> bool:
        """Read every pending event; True if none could have changed the last answer."""
        try:
            events = read_events(self._fd)
        except OSError as exc:
            self._off = f"inotify failed: {exc}"
            return False
        # a name created, removed or renamed meanwhile may now be another file
        renamed = {(wd, name) for wd, mask, name in events if mask & ~_CONTENT_ONLY}
        unchanged = True
        for wd, mask, name in events:
            if mask & (_IN_IGNORED | _IN_DELETE_SELF | _IN_MOVE_SELF):
                self._dirs.pop(wd, None)
                self._extra.discard(wd)
            if mask & (_IN_MOVE_SELF | _IN_Q_OVERFLOW) or (
                mask & _IN_ISDIR and mask & (_IN_MOVED_FROM | _IN_MOVED_TO | _IN_DELETE)
            ):
                self._reset = True  # paths below a moved directory are no longer what they were
            if (wd, name) in renamed or not self._harmless(wd, mask, name):
                unchanged = False
        return unchanged

    def _harmless(self, wd: int, mask: int, name: bytes) -> bool:
        """A content change of a file the last answer lists as untracked (or ignored) changes
        nothing — unless the file is also a tracked one under another name (a hard link)."""
        if mask & ~_CONTENT_ONLY or self._lines is None:
            return False
        rel = self._dirs.get(wd)
        if rel is None or not name:
            return False
        path = os.path.join(rel, os.fsdecode(name))
        listed = set(self._lines)
        parts = path.split("/")
        # listed itself, or in a directory listed as untracked (or ignored) as a whole
        if not (
            f"?? {path}" in listed
            or f"!! {path}" in listed
            or any(f"{tag} {'/'.join(parts[:n])}/" in listed for n in range(1, len(parts)) for tag in ("??", "!!"))
        ):
            return False
        try:
            found = os.lstat(os.path.join(self._top, path))
        except OSError:
            return False
        return stat.S_ISREG(found.st_mode) and found.st_nlink == 1


def read_events(fd: int) -> list[tuple[int, int, bytes]]:
    """Every event pending on the inotify descriptor ``fd``: (watch, mask, name)."""
    events: list[tuple[int, int, bytes]] = []
    while True:
        try:
            data = os.read(fd, 65536)
        except BlockingIOError:
            return events
        offset = 0
        while offset + _EVENT.size <= len(data):
            wd, mask, _cookie, size = _EVENT.unpack_from(data, offset)
            events.append((wd, mask, data[offset + _EVENT.size : offset + _EVENT.size + size].rstrip(b"\0")))
            offset += _EVENT.size + size


class Stillness:
    """Whether anything at all changed in a tree since the last look: inotify watches on
    every directory of it, named by whoever knows them (the pool's record of a working copy
    it just restored), so no walk is paid.

    :meth:`still` is True only while every directory is watched and not one event came since
    the previous call: any change to a name or a file's content or metadata in a watched
    directory ends it. A directory created meanwhile is watched from then on, with what it
    holds; a lost event (queue overflow), a watch refused or a file system whose changes may
    not all reach inotify turns it off for good (:meth:`still` is then always False).
    Not seen, as for :class:`StatusWatch`: writes through a shared memory mapping and through
    a hard link whose other name is outside the tree.
    """

    def __init__(self, root: Path, dirs: Iterable[str]) -> None:
        self.root = os.path.realpath(root)
        self.off = ""
        self._fd = -1
        self._libc: ctypes.CDLL | None = None
        self._watched = 0
        self._paths: dict[int, str] = {}  # watch descriptor -> directory
        opened = _inotify(Path(self.root))
        if isinstance(opened, str):
            self.off = opened
            return
        self._libc, self._fd = opened
        for rel in dirs:
            if not self._watch(os.path.join(self.root, rel) if rel else self.root):
                break

    def _watch(self, path: str) -> bool:
        assert self._libc is not None
        self._watched += 1
        if self._watched > MAX_WATCHES:
            self.off = f"more than {MAX_WATCHES} directories to watch"
            return False
        wd = int(self._libc.inotify_add_watch(self._fd, os.fsencode(path), _MASK))
        if wd < 0:
            self.off = f"inotify refused a watch on {path}: {os.strerror(ctypes.get_errno())}"
            return False
        self._paths[wd] = path
        return True

    def still(self) -> bool:
        """Nothing changed since the last look (this or :meth:`absorb`, or the watches' placing)."""
        return self._look() == 0

    def absorb(self) -> bool:
        """Take what changed since the last look as known (the caller's own writing): True
        while the watch goes on."""
        return self._look() >= 0

    def _look(self) -> int:
        """How many events came since the last look; -1 when the watch is off."""
        if not self.off:
            try:
                events = read_events(self._fd)
            except OSError as exc:
                self.off = f"inotify failed: {exc}"
                events = []
            for wd, mask, name in events:
                if mask & _IN_Q_OVERFLOW:
                    self.off = "inotify lost events"
                elif mask & _IN_ISDIR and mask & (_IN_CREATE | _IN_MOVED_TO) and wd in self._paths:
                    self._watch_new(os.path.join(self._paths[wd], os.fsdecode(name)))
            if not self.off:
                return len(events)
        self.close()
        return -1

    def _watch_new(self, top: str) -> None:
        """Watch a directory that appeared, and every directory below it (not followed links)."""
        pending = [top]
        while pending and not self.off:
            here = pending.pop()
            try:
                if not self._watch(here):
                    return
                with os.scandir(here) as listing:
                    pending.extend(e.path for e in listing if e.is_dir(follow_symlinks=False))
            except OSError:  # gone again meanwhile: the event that says so is pending
                continue

    def close(self) -> None:
        if self._fd >= 0:
            os.close(self._fd)
            self._fd = -1
        self.off = self.off or "closed"


def _visible(lines: tuple[str, ...]) -> tuple[str, ...]:
    """The answer without the ignored paths asked for to know what not to watch."""
    return tuple(line for line in lines if not line.startswith("!! "))


def read_status(workspace: Path) -> tuple[str, ...] | None:
    """``git status --porcelain --ignored`` of ``workspace`` by snodo's own hardened git: the
    lines of :func:`snodo.governance.runner.uncommitted`, plus ``!!`` lines for what git
    ignores (which the watch leaves unwatched); ``None`` if git could not answer."""
    with contextlib.suppress(EnvironmentProblem):
        found = run_git(workspace, "--no-optional-locks", "status", "--porcelain", "--ignored=traditional")
        if found.ok:
            return tuple(line for line in found.stdout.splitlines() if line.strip())
    return None
