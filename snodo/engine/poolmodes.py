"""What git cannot see in a reused working copy, undone before it is cleaned and reset
(:func:`snodo.engine.pool.restore`): git records no mode but the executable bit, lists no
socket, fifo or device and skips every entry named ``.git``.
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


def repair_dirs(root: Path, *, walked: dict[str, Any]) -> int | None:
    """Give every directory from ``root`` down a fresh checkout's mode (a ``chmod 000`` one
    stops ``clean``), delete what is neither a directory, a regular file nor a link, and
    every ``.git`` entry below ``root``. Returns how many paths were repaired or deleted;
    ``None`` when that cannot be done. An ``lstat`` per directory, no file's; each directory's
    key and entries go into ``walked`` (:func:`~snodo.workspace.gitmeta.remember_walk`)."""
    want, repaired = 0o777 & ~_umask(), 0
    try:
        top = os.lstat(root)
        if stat.S_IMODE(top.st_mode) != want:
            os.chmod(root, want)
            top = os.lstat(root)
        if not stat.S_ISDIR(top.st_mode):
            return None
        pending = [(str(root), top)]
        while pending:
            directory, dir_st = pending.pop()
            with os.scandir(directory) as it:
                entries = list(it)
            walked[directory] = ((dir_st.st_ino, dir_st.st_mtime_ns, dir_st.st_ctime_ns), entries)
            for entry in entries:
                if directory == str(root) and entry.name == ".git":
                    continue  # the copy's own, checked by the pool
                st, fixed = _repair(entry, want, top.st_dev)
                repaired += fixed
                if st is not None:
                    pending.append((entry.path, st))
    except OSError:
        return None
    return repaired


def _repair(entry: os.DirEntry[str], want: int, dev: int) -> tuple[os.stat_result | None, bool]:
    """One entry of :func:`repair_dirs`' walk: the ``lstat`` to walk it with when it is a
    directory, and whether it was repaired or deleted."""
    if entry.name[:1] == "." and is_git_name(entry.name):
        if entry.is_dir(follow_symlinks=False):
            remove_tree(Path(entry.path))
        else:
            os.unlink(entry.path)
        return None, True
    if entry.is_dir(follow_symlinks=False):
        st = entry.stat(follow_symlinks=False)
        if st.st_dev != dev:
            raise OSError(f"{entry.path} is a mount point")
        if stat.S_IMODE(st.st_mode) == want:
            return st, False
        os.chmod(entry.path, want)
        return os.lstat(entry.path), True
    if entry.is_file(follow_symlinks=False) or entry.is_symlink():
        return None, False
    os.unlink(entry.path)
    return None, True


def remove_tree(path: Path) -> None:
    """Delete ``path`` whatever the modes below it (a ``chmod 000`` directory stops a plain
    removal); a link is removed, never followed. ``OSError`` when something is left."""
    if not stat.S_ISDIR(os.lstat(path).st_mode):
        os.unlink(path)
        return
    os.chmod(path, 0o700)
    for top, dirs, _files in os.walk(path):  # never enters a link
        for name in dirs:
            if not os.path.islink(full := os.path.join(top, name)):
                os.chmod(full, 0o700)
    shutil.rmtree(path)


def repair_written(walked: dict[str, Any], since: int) -> int | None:
    """Give the regular files of every directory :func:`repair_dirs` saw changed in second
    ``since`` or later a checkout's mode (executable bit kept); how many, ``None`` for a mode
    that will not change. git compares ctimes to the second: a file written and then
    ``chmod``-ed in its index's second looks unchanged to the reset (a ``chmod`` otherwise
    changes the ctime, and the reset undoes it); writing it changed its directory's mtime."""
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
