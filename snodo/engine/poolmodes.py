"""What git cannot see in a reused working copy, undone before it is cleaned and reset
(:func:`snodo.engine.pool.restore`): git records no mode but the executable bit, lists no
socket, fifo or device and skips every entry named ``.git``.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import stat
import time
from collections.abc import Mapping
from pathlib import Path

from snodo.workspace.gitmeta import DirScan, is_git_name, scanned


def _umask() -> int:
    with contextlib.suppress(OSError, ValueError), open("/proc/self/status", encoding="ascii") as fh:
        for line in fh:
            if line.startswith("Umask:"):
                return int(line.split()[1], 8)
    return 0o022


def repair(
    root: Path, before: Mapping[str, DirScan], since: int, scope: list[str] | None = None
) -> dict[str, DirScan] | None:
    """Give every directory from ``root`` down a fresh checkout's mode (a ``chmod 000`` one
    stops ``clean``), delete what is neither a directory, a regular file nor a link, and
    every ``.git`` entry below ``root``; the walk (for ``before`` of the next one and
    :func:`~snodo.workspace.gitmeta.remember_walk`), ``None`` when that cannot be done.

    A directory is read only when it changed since ``before``, a walk of the copy once it was
    repaired: its inode, mtime or ctime differ, or it was racy then. Nothing that makes a
    repair needed — an entry made, removed or renamed, a ``chmod`` — leaves a directory's
    ctime as it was, and no unprivileged process can set a ctime. Regular files of a
    directory that changed in second ``since`` or later get a checkout's mode too (executable
    bit kept): git compares ctimes to the second, so a file written and then ``chmod``-ed in
    its index's second looks unchanged to the reset; writing it changed its directory.

    ``scope`` gets every path an untracked file or directory can be at (relative to
    ``root``): each entry of a changed directory ``before`` knew, but the subdirectories it
    knew (read in turn when they changed); a new directory is an entry of such a one, and a
    directory not read holds what it held."""
    mask = _umask()
    want, threshold, top = 0o777 & ~mask, since * 1_000_000_000, str(root)
    walked: dict[str, DirScan] = {}
    now = time.time_ns()
    try:
        dev = os.lstat(top).st_dev
        pending = [top]
        while pending:
            here = pending.pop()
            st = _fixed_dir(here, want, dev)
            key = (st.st_ino, st.st_mtime_ns, st.st_ctime_ns)
            known = before.get(here)
            if known is None or known.key != key or known.racy or key[1] >= threshold:
                entries = _repaired_entries(here, top, mask if key[1] >= threshold else None)
                known = scanned(key, entries, now)
                if scope is not None and here in before:  # a new directory is in it whole
                    scope.extend(
                        e.path[len(top) + 1 :]
                        for e in entries
                        if not (e.path in before and e.is_dir(follow_symlinks=False))
                        and not (here == top and e.name == ".git")
                    )
            walked[here] = known
            pending.extend(known.children)
    except OSError:
        return None
    return walked


def _fixed_dir(path: str, want: int, dev: int) -> os.stat_result:
    st = os.lstat(path)
    if not stat.S_ISDIR(st.st_mode) or st.st_dev != dev:
        raise OSError(f"{path} is not a directory of the copy (a link or a mount point)")
    if stat.S_IMODE(st.st_mode) != want:
        os.chmod(path, want)
        st = os.lstat(path)
    return st


def _repaired_entries(here: str, top: str, modes: int | None) -> list[os.DirEntry[str]]:
    """The entries of ``here`` left once every ``.git`` (but the copy's own) and every entry
    of another kind is deleted; with ``modes`` (the umask), its regular files get a checkout's mode."""
    with os.scandir(here) as it:
        entries = list(it)
    kept = []
    for entry in entries:
        if entry.name[:1] == "." and is_git_name(entry.name):
            if here == top and entry.name == ".git":
                kept.append(entry)  # the copy's own, checked by the pool
            else:
                remove_tree(Path(entry.path))
        elif entry.is_file(follow_symlinks=False):
            kept.append(entry)
            if modes is not None:
                _checkout_mode(entry.path, modes)
        elif entry.is_dir(follow_symlinks=False) or entry.is_symlink():
            kept.append(entry)
        else:
            os.unlink(entry.path)
    return kept


def _checkout_mode(path: str, mask: int) -> None:
    mode = stat.S_IMODE(os.lstat(path).st_mode)
    want = (0o777 if mode & 0o100 else 0o666) & ~mask
    if mode != want:
        os.chmod(path, want)


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


def save_walk(path: Path, root: Path, walked: Mapping[str, DirScan]) -> None:
    """Keep ``walked``, a :func:`repair` of ``root``, at ``path`` for the next one."""
    top = str(root)
    dirs = [
        [
            here[len(top) + 1 :],
            *scan.key,
            scan.environment,
            scan.racy,
            [child[len(here) + 1 :] for child in scan.children],
            [git[len(here) + 1 :] for git in scan.gits],
        ]
        for here, scan in walked.items()
    ]
    tmp = path.with_name(f"{path.name}.tmp")
    tmp.write_text(json.dumps({"version": 1, "root": top, "dirs": dirs}), encoding="utf-8")
    os.replace(tmp, path)


def load_walk(path: Path, root: Path) -> dict[str, DirScan]:
    """The walk :func:`save_walk` kept for ``root`` at ``path``; empty (every directory is
    read) when there is none or it cannot be read."""
    top = str(root)
    walked: dict[str, DirScan] = {}
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
        if data["version"] != 1 or data["root"] != top:
            return {}
        for rel, ino, mtime, ctime, environment, racy, children, gits in data["dirs"]:
            here = f"{top}/{rel}" if rel else top
            walked[here] = DirScan(
                key=(ino, mtime, ctime),
                children=tuple(f"{here}/{name}" for name in children),
                gits=tuple(f"{here}/{name}" for name in gits),
                environment=bool(environment),
                racy=bool(racy),
            )
    except (OSError, ValueError, TypeError, KeyError):
        return {}
    return walked
