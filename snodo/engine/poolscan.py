"""What a pooled copy held when it was last restored, so the next restore reads only what
changed since: every directory's identity and entry names, recorded in the copy's git
directory (:data:`RECORD`), where no agent writes.

A directory whose inode, mtime and ctime are those recorded holds the same names and has
the same mode (adding, removing or renaming an entry changes its mtime; a ``chmod`` its
ctime); one changed within :data:`RACY_NS` of the record may have changed again within the
same clock tick, so it is read again. So :func:`sweep` costs an ``lstat`` per directory and
a ``scandir`` of the directories that changed, whatever the number of files. In those, a
name the record does not hold is something the run made: untracked or ignored, since the
record was taken right after a restore had removed everything git does not track — it is
deleted (a tracked file the run replaced keeps its name and is the reset's to restore).
"""

from __future__ import annotations

import json
import os
import shutil
import stat
import time
from pathlib import Path
from typing import Any

from attrs import frozen

from snodo.engine.poolmodes import _umask, repair_modes

RECORD = "snodo-restore.dirs"
#: A directory whose ctime is this close to the record may change again unseen (a
#: timestamp is only as fine as the kernel's clock tick): it is read again next time.
RACY_NS = 2_000_000_000

#: root-relative directory ("" for the root) -> [inode, mtime_ns, ctime_ns, racy, dirs, others],
#: ``dirs`` and ``others`` its entry names joined with ``/``, which no name holds (and JSON
#: does not escape, as it does NUL): one JSON string per directory reads and writes several
#: times faster than a string per name (30,000 names: 8 ms a restore as lists), and a
#: directory's names are split only when it changed.
Record = dict[str, list[Any]]


def _names(joined: str) -> list[str]:
    return joined.split("/") if joined else []


@frozen
class Swept:
    """What :func:`sweep` did and saw."""

    deleted: int
    #: a link to a directory is in the copy (git follows it in a tracked path: check again)
    linked_dir: bool
    #: each directory as seen: its key and the root-relative paths of its subdirectories and
    #: of its ``.git`` entries (for :func:`snodo.workspace.gitmeta.remember_dirs`)
    seen: dict[str, tuple[tuple[int, int, int], tuple[str, ...], tuple[str, ...]]]


def load(gitdir: str) -> Record | None:
    try:
        with open(os.path.join(gitdir, RECORD), encoding="utf-8", errors="surrogateescape") as fh:
            data = json.load(fh)
    except (OSError, ValueError):
        return None
    if not isinstance(data, dict) or not isinstance(data.get(""), list) or len(data[""]) != 6:
        return None
    root = data[""]
    if not isinstance(root[4], str) or not isinstance(root[5], str) or "\0" in root[4] + root[5]:
        return None  # an older form (lists of names, or names joined with NUL)
    return data


def save(gitdir: str, root: Path, before: Record | None, since: int) -> tuple[list[str], tuple[str, ...]]:
    """Record the copy as it is now (right after a restore that started in second
    ``since``): directories unchanged since ``before`` are taken from it, the others read.
    Returns the files written since (see :func:`scan`) and every directory of the copy
    (root-relative, ``""`` for the root)."""
    record, written = scan(root, before, since)
    tmp = os.path.join(gitdir, f"{RECORD}.tmp")
    # ``dumps``, not ``dump``: only the one-shot encoder is the C one (~10x on 30,000 names).
    text = json.dumps(record, separators=(",", ":"))
    with open(tmp, "w", encoding="utf-8", errors="surrogateescape") as fh:
        fh.write(text)
    os.replace(tmp, os.path.join(gitdir, RECORD))
    return written, tuple(record)


def _key(st: os.stat_result) -> list[int]:
    return [st.st_ino, st.st_mtime_ns, st.st_ctime_ns]


def scan(root: Path, before: Record | None, since: int) -> tuple[Record, list[str]]:
    """Every directory below ``root`` (not ``root/.git``, no link followed) with its key and
    entry names, reading only those whose key differs from ``before`` (or was racy); and
    the root-relative paths of the regular files in the directories read whose inode
    changed in second ``since`` or later. Those are the files the restore wrote: git
    compares ctimes to the second, so a ``chmod`` of one within the same second would look
    like no change to the next restore, which repairs them by name instead. (git writes a
    file by creating it anew, which changes its directory: it is among those read.)"""
    now = time.time_ns()
    record: Record = {}
    written: list[str] = []
    pending = [""]
    while pending:
        rel = pending.pop()
        path = os.path.join(root, rel) if rel else str(root)
        st = os.lstat(path)
        old = (before or {}).get(rel)
        if old is not None and old[:3] == _key(st) and not old[3]:
            joined_dirs, joined_others = old[4], old[5]
            dirs = _names(joined_dirs)
        else:
            with os.scandir(path) as it:
                entries = list(it)
            dirs = sorted(e.name for e in entries if e.is_dir(follow_symlinks=False) and (rel or e.name != ".git"))
            joined_dirs = "/".join(dirs)
            joined_others = "/".join(sorted(e.name for e in entries if not e.is_dir(follow_symlinks=False)))
            written += [
                f"{rel}/{e.name}" if rel else e.name
                for e in entries
                if e.is_file(follow_symlinks=False)
                and (rel or e.name != ".git")
                and e.stat(follow_symlinks=False).st_ctime >= since
            ]
        record[rel] = [*_key(st), now - st.st_ctime_ns < RACY_NS, joined_dirs, joined_others]
        pending.extend(f"{rel}/{d}" if rel else d for d in dirs)
    return record, written


def sweep(root: Path, record: Record) -> Swept | None:
    """Bring the copy back to the names ``record`` holds: every directory the mode a
    checkout gives it, every name the record does not hold deleted (whatever its mode),
    sockets and fifos deleted. ``None`` when that cannot be done (a mount point, an
    unreadable directory, a deletion that fails): the caller takes the long path."""
    want = 0o777 & ~_umask()
    deleted, linked = 0, False
    seen: dict[str, tuple[tuple[int, int, int], tuple[str, ...], tuple[str, ...]]] = {}
    try:
        device = os.lstat(root).st_dev
    except OSError:
        return None
    pending = [""]
    while pending:
        rel = pending.pop()
        path = os.path.join(root, rel) if rel else str(root)
        try:
            st = os.lstat(path)
            if not stat.S_ISDIR(st.st_mode) or st.st_dev != device:
                return None
            if stat.S_IMODE(st.st_mode) != want:
                os.chmod(path, want)
                st = os.lstat(path)
        except OSError:
            return None
        old = record.get(rel)
        if old is not None and old[:3] == _key(st) and not old[3]:
            dirs = _names(old[4])
        else:
            found = _tidy(root, rel, old)
            if found is None:
                return None
            dirs, gone, link = found
            deleted, linked = deleted + gone, linked or link
            st = os.lstat(path)
        # A `.git` is never tracked, so below the root none survives the tidying.
        gits = [".git"] if not rel and os.path.lexists(os.path.join(root, ".git")) else []
        children = [f"{rel}/{d}" if rel else d for d in dirs]
        key = (st.st_ino, st.st_mtime_ns, st.st_ctime_ns)
        seen[rel] = (key, tuple(children), tuple(f"{rel}/{g}" if rel else g for g in gits))
        pending.extend(children)
    return Swept(deleted=deleted, linked_dir=linked, seen=seen)


def _tidy(root: Path, rel: str, old: list[Any] | None) -> tuple[list[str], int, bool] | None:
    """Read one changed directory: delete what the record does not name there (all of it,
    for a directory the record does not hold) and what git cannot see; return its
    subdirectories, how many entries were deleted and whether a link to a directory is
    among them."""
    path = os.path.join(root, rel) if rel else str(root)
    known = {*_names(old[4]), *_names(old[5])} if old is not None else set()
    dirs: list[str] = []
    deleted, linked = 0, False
    try:
        with os.scandir(path) as it:
            entries = list(it)
    except OSError:
        return None
    for entry in entries:
        if not rel and entry.name == ".git":
            continue
        try:
            if entry.name not in known:
                if entry.is_dir(follow_symlinks=False):
                    os.chmod(entry.path, 0o700)  # a `chmod 000` directory: readable again
                    if repair_modes(Path(entry.path)) is None:
                        return None  # a mount point, or a mode that will not change
                    shutil.rmtree(entry.path)
                else:
                    os.unlink(entry.path)
                deleted += 1
            elif entry.is_dir(follow_symlinks=False):
                dirs.append(entry.name)
            elif entry.is_symlink():
                linked = linked or os.path.isdir(entry.path)
            elif not entry.is_file(follow_symlinks=False):
                os.unlink(entry.path)  # a fifo or socket where a tracked file was
                deleted += 1
        except OSError:
            return None
    return dirs, deleted, linked


def write_names(gitdir: str, name: str, paths: list[str]) -> None:
    """Keep ``paths`` (NUL-separated) in the file ``name`` of the copy's git directory."""
    tmp = os.path.join(gitdir, f"{name}.tmp")
    with open(tmp, "w", encoding="utf-8", errors="surrogateescape") as fh:
        fh.write("\0".join(paths))
    os.replace(tmp, os.path.join(gitdir, name))


def read_names(gitdir: str, name: str) -> list[str]:
    """The paths :func:`write_names` kept under ``name`` (none when there is no such file)."""
    try:
        with open(os.path.join(gitdir, name), encoding="utf-8", errors="surrogateescape") as fh:
            return [p for p in fh.read().split("\0") if p]
    except FileNotFoundError:
        return []
