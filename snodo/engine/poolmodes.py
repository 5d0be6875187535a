"""Modes a reused working copy must get back, and what git cannot see in it.

git records no mode but the executable bit, lists no socket, fifo or device and skips
every entry named ``.git``, so before a pooled copy is cleaned and reset
(:func:`snodo.engine.pool.restore`) something else must undo what an agent can leave there
that way: a ``chmod 000`` directory (it stops ``git clean`` and ``reset``), a directory made
read-only, a fifo, a ``.git`` planted below the top. Two walks:

- :func:`repair_dirs`, on every reuse: the directories only (an ``lstat`` each, no ``stat``
  of a file: the names come from ``scandir``'s entry types). A tracked file's changed mode
  is the reset's to undo — a ``chmod`` changes the file's ctime, and the reset compares
  every file with the stat data the last restore recorded (see the pool). Untracked files
  are ``clean``'s to delete, whatever their mode.
- :func:`repair_modes`, when that cannot be relied on (a copy the pool has no record of) and
  before a copy is deleted: every path, files included.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import stat
from pathlib import Path
from typing import Any

from snodo.workspace.gitmeta import is_git_name


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


def repair_dirs(root: Path, *, walked: dict[str, Any] | None = None) -> int | None:
    """Give every directory below ``root`` (``root`` included) the mode a fresh checkout
    gives it and delete what is neither a directory, a regular file nor a link (sockets,
    fifos, devices: never tracked, never listed as untracked) and every ``.git`` entry
    below ``root`` (never tracked; git's own walks skip the name, so ``clean`` would leave
    it). Returns how many paths were repaired or deleted; ``None`` when that cannot be
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
    device, repaired = top.st_dev, 0
    pending = [(str(root), top)]
    while pending:
        directory, dir_st = pending.pop()
        entries = _entries(directory, dir_st, walked)
        if entries is None:
            return None
        for entry in entries:
            try:
                if entry.name[:1] == "." and is_git_name(entry.name):
                    if directory == str(root) and entry.name == ".git":
                        continue  # the copy's own, checked by the pool
                    if entry.is_dir(follow_symlinks=False):
                        if repair_modes(Path(entry.path)) is None:
                            return None
                        shutil.rmtree(entry.path)
                    else:
                        os.unlink(entry.path)
                    repaired += 1  # (the directory's times changed: the run's first look reads it again)
                    continue
                if entry.is_file(follow_symlinks=False):
                    continue  # most entries: decided by the entry's type, no system call
                if entry.is_dir(follow_symlinks=False):
                    st = entry.stat(follow_symlinks=False)
                    if st.st_dev != device:
                        return None
                    if stat.S_IMODE(st.st_mode) != want:
                        os.chmod(entry.path, want)
                        repaired += 1
                        st = os.lstat(entry.path)
                    pending.append((entry.path, st))
                elif not entry.is_symlink():
                    os.unlink(entry.path)
                    repaired += 1
            except OSError:
                return None
    return repaired


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


def repair_written(walked: dict[str, Any], since: int) -> int | None:
    """Give the regular files of every directory :func:`repair_dirs` saw changed in second
    ``since`` or later the mode a checkout gives them (their executable bit kept: git
    compares that one itself). Returns how many were repaired, ``None`` for a mode that will
    not change.

    git compares ctimes to the second: a file a checkout or reset wrote in the second its
    index was written, then ``chmod``-ed within that second, looks unchanged to the next
    reset (its content is compared, not its mode). Writing such a file created it anew,
    which changed its directory's mtime in that second or later, so only those directories'
    files are looked at: the few the last restore wrote, and what the run itself changed."""
    mask = _umask()
    file_mode, exec_mode = 0o666 & ~mask, 0o777 & ~mask
    threshold = since * 1_000_000_000
    repaired = 0
    for key, entries in walked.values():
        if key[1] < threshold:
            continue
        for entry in entries:
            try:
                if not entry.is_file(follow_symlinks=False):
                    continue
                mode = stat.S_IMODE(os.lstat(entry.path).st_mode)
                want = exec_mode if mode & 0o100 else file_mode
                if mode != want:
                    os.chmod(entry.path, want)
                    repaired += 1
            except FileNotFoundError:
                continue
            except OSError:
                return None
    return repaired
