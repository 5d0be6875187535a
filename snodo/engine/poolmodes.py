"""Modes a reused working copy must get back, and what git cannot see in it.

git records no mode but the executable bit and lists no socket, fifo or device, so before a
pooled copy is reset (:func:`snodo.engine.pool.restore`) something else must undo what an
agent can leave there that way: a ``chmod 000`` directory (it stops ``git clean`` and
``reset``), a directory made read-only, a fifo. Two walks:

- :func:`repair_dirs`, on every reuse: the directories only (an ``lstat`` each, no ``stat``
  of a file: the names come from ``scandir``'s entry types). A tracked file's changed mode
  is the reset's to undo — a ``chmod`` changes the file's ctime, and the reset compares
  every file with the stat data the last restore recorded (see the pool). Untracked files
  are deleted whatever their mode.
- :func:`repair_modes`, when that cannot be relied on (a copy the pool has no record of) and
  before a copy is deleted: every path, files included.
"""

from __future__ import annotations

import contextlib
import os
import stat
from pathlib import Path
from typing import Any

from attrs import frozen


def _umask() -> int:
    with contextlib.suppress(OSError, ValueError), open("/proc/self/status", encoding="ascii") as fh:
        for line in fh:
            if line.startswith("Umask:"):
                return int(line.split()[1], 8)
    return 0o022


def _entries(directory: str, dir_st: os.stat_result, walked: dict[str, Any] | None) -> list[os.DirEntry[str]] | None:
    """The entries of ``directory`` (``None``: unreadable), kept in ``walked`` with its
    ``lstat`` key for the run's first look for new ``.git`` entries."""
    try:
        with os.scandir(directory) as it:
            entries = list(it)
    except OSError:
        return None
    if walked is not None:
        walked[directory] = ((dir_st.st_ino, dir_st.st_mtime_ns, dir_st.st_ctime_ns), entries)
    return entries


@frozen
class DirWalk:
    """What :func:`repair_dirs` did and saw."""

    repaired: int
    #: a symbolic link to a directory is in the copy: git follows such a link in a tracked
    #: path when it compares stat data, so the restored copy must be checked once more
    linked_dir: bool


def repair_dirs(root: Path, *, walked: dict[str, Any] | None = None) -> DirWalk | None:
    """Give every directory below ``root`` (``root`` included) the mode a fresh checkout
    gives it and delete what is neither a directory, a regular file nor a link (sockets,
    fifos, devices: never tracked, never listed as untracked). ``None`` when that cannot be
    done: a mount point, a mode that will not change, an unreadable directory.

    Costs an ``lstat`` per directory and one ``scandir`` each, whatever the number of files.
    What it saw of each directory (its ``lstat`` key and entries) goes into ``walked``."""
    want = 0o777 & ~_umask()
    try:
        top = os.lstat(root)
        if stat.S_IMODE(top.st_mode) != want:
            os.chmod(root, want)
            top = os.lstat(root)
    except OSError:
        return None
    if not stat.S_ISDIR(top.st_mode):
        return None
    device, repaired, linked = top.st_dev, 0, False
    pending = [(str(root), top)]
    while pending:
        directory, dir_st = pending.pop()
        entries = _entries(directory, dir_st, walked)
        if entries is None:
            return None
        for entry in entries:
            try:
                if entry.is_file(follow_symlinks=False):
                    continue  # most entries: decided by the entry's type, no system call
                if entry.is_dir(follow_symlinks=False):
                    if directory == str(root) and entry.name == ".git":
                        continue
                    st = entry.stat(follow_symlinks=False)
                    if st.st_dev != device:
                        return None
                    if stat.S_IMODE(st.st_mode) != want:
                        os.chmod(entry.path, want)
                        repaired += 1
                        st = os.lstat(entry.path)
                    pending.append((entry.path, st))
                elif entry.is_symlink():
                    linked = linked or os.path.isdir(entry.path)
                else:
                    os.unlink(entry.path)
                    repaired += 1
            except OSError:
                return None
    return DirWalk(repaired=repaired, linked_dir=linked)


def repair_modes(root: Path, *, walked: dict[str, Any] | None = None) -> int | None:
    """Give every directory and file below ``root`` the mode a fresh checkout gives it (an
    agent's ``chmod 000`` directory would stop ``git clean``; a read-only file would stay
    read-only, as git tracks only the executable bit) and delete what git cannot see
    (sockets, fifos, devices). Returns how many paths were repaired, ``None`` for one that
    cannot be: a mount point, a mode that will not change, an unreadable directory.

    An ``lstat`` of every path: the pool's fallback, when no recorded stat data can say
    which tracked files changed, and the step before a copy is deleted."""
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
        entries = _entries(directory, dir_st, walked)
        if entries is None:
            return None
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


def repair_files(
    root: Path, paths: list[str], real_dirs: set[str], *, kept: list[str] | None = None, racy_from: int = 0
) -> int | None:
    """Give each of ``paths`` (root-relative, regular files) the mode a checkout gives it,
    when its directory is one of ``real_dirs`` (reached from ``root`` without a link: a
    mode is never changed through one). ``None`` when a mode will not change.

    ``kept``, when given, receives the paths still worth repairing by name next time: those
    not looked at, those repaired now, and those whose inode changed in second
    ``racy_from`` (when the index the next restore compares with was written) or later.
    Any other file's recorded ctime is earlier than that index, so a later ``chmod`` (a
    later ctime) is seen by git itself: the first checkout's list of every file shrinks to
    the few written in that index's second."""
    mask = _umask()
    file_mode, exec_mode = 0o666 & ~mask, 0o777 & ~mask
    repaired = 0
    for rel in paths:
        path = os.path.join(root, rel)
        if os.path.dirname(path) not in real_dirs:
            if kept is not None:
                kept.append(rel)
            continue
        try:
            st = os.lstat(path)
        except OSError:
            continue
        want = exec_mode if st.st_mode & 0o100 else file_mode
        changed = stat.S_ISREG(st.st_mode) and stat.S_IMODE(st.st_mode) != want
        if changed:
            try:
                os.chmod(path, want)
            except OSError:
                return None
            repaired += 1
        if kept is not None and (changed or int(st.st_ctime) >= racy_from):
            kept.append(rel)
    return repaired
