"""Snapshots of files and directories, and putting an entry back (:mod:`snodo.engine.inplace`)."""

from __future__ import annotations

import contextlib
import hashlib
import os
import re
import shutil
import stat
from collections.abc import Iterable, Mapping
from pathlib import Path

from attrs import frozen

_RUN_ID = re.compile(r"^[0-9a-f]{8}$")  # how snodo.engine.worktree names a run's working copy


MAX_SAVED_BYTES = 4 * 1024 * 1024


@frozen(kw_only=True)
class Saved:
    """An entry as it was (file, link, directory); ``other`` (too large, special, unreadable) cannot be put back."""

    kind: str
    data: bytes = b""
    target: str = ""
    mode: int = 0o644


def save(path: Path) -> Saved:
    try:
        st = os.lstat(path)
        if stat.S_ISLNK(st.st_mode):
            return Saved(kind="link", target=os.readlink(path))
        if stat.S_ISDIR(st.st_mode):
            return Saved(kind="dir")
        if stat.S_ISREG(st.st_mode) and st.st_size <= MAX_SAVED_BYTES:
            return Saved(kind="file", data=path.read_bytes(), mode=stat.S_IMODE(st.st_mode))
    except OSError:
        pass
    return Saved(kind="other")


def remove_entry(path: Path) -> None:
    if path.is_dir() and not path.is_symlink():
        shutil.rmtree(path)
    elif os.path.lexists(path):
        path.unlink()


def put_back(path: Path, saved: Saved | None) -> bool:
    """Make ``path`` what ``saved`` says it was (absent when ``None``); whether it worked."""
    try:
        if saved is None:
            remove_entry(path)
            return True
        if saved.kind == "other":
            return False
        if saved.kind == "dir":
            if not path.is_dir() or path.is_symlink():
                remove_entry(path)
                path.mkdir(parents=True)
            return True
        remove_entry(path)
        path.parent.mkdir(parents=True, exist_ok=True)
        if saved.kind == "link":
            os.symlink(saved.target, path)
        else:
            path.write_bytes(saved.data)
            path.chmod(saved.mode)
    except OSError:
        return False
    return True


def differences(before: Mapping[str, str], after: Mapping[str, str]) -> list[str]:
    return sorted(k for k in set(before) | set(after) if before.get(k) != after.get(k))


def git_dirs(root: Path) -> tuple[Path | None, Path | None]:
    """This working copy's git directory and the common one, read from the files (no git before the snapshot)."""
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


def git_label(gitdir: Path | None, common: Path | None) -> str:
    if gitdir is None or common is None or gitdir == common:
        return ".git"
    try:
        return ".git/" + gitdir.relative_to(common).as_posix()
    except ValueError:
        return ".git/worktree"


def read_text(path: Path) -> str:
    try:
        return path.read_text(errors="replace").strip()
    except OSError:
        return ""


def fingerprint(path: Path) -> str:
    """A file's hash and executable bit, a link's target, or the kind (only files are read: a FIFO would block)."""
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


def entries_below(
    base: Path, *, prune: Iterable[str] = (), prune_top: Iterable[str] = (), skip: Iterable[str] = ()
) -> dict[str, Path]:
    """Every non-directory entry under ``base`` by relative POSIX path, but directories in
    ``prune`` (``prune_top`` at the top) and files in ``skip`` or named ``*.lock``. A link to
    a directory is an entry, never entered."""
    found: dict[str, Path] = {}
    if not base.is_dir() or base.is_symlink():
        return found
    pruned, skipped = set(prune), set(skip)
    for directory, dirnames, filenames in os.walk(base):
        here = Path(directory)
        left_out = pruned | set(prune_top) if here == base else pruned
        dirnames[:] = [d for d in dirnames if d not in left_out]
        for name in filenames + [d for d in dirnames if (here / d).is_symlink()]:
            if name not in skipped and not name.endswith(".lock"):
                found[(here / name).relative_to(base).as_posix()] = here / name
    return found


def packed_refs(path: Path) -> dict[str, str]:
    refs: dict[str, str] = {}
    with contextlib.suppress(OSError):
        for line in path.read_text(errors="replace").splitlines():
            sha, _, name = line.partition(" ")
            if name and not line.startswith(("#", "^")):
                refs[name] = sha
    return refs


def fingerprints(entries: Mapping[str, Path]) -> dict[str, str]:
    return {label: fingerprint(full) for label, full in entries.items()}


def outside_of(root: Path) -> dict[str, Path]:
    """The workspace's parent, where ``../x`` lands, but other runs' working copies (named
    by their run id, or holding a ``.git``); a directory is listed as ``../name/`` too, so
    an empty new one counts."""
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
            found.update({f"../{name}/{rel}": entry for rel, entry in entries_below(full).items()})
        else:
            found[f"../{name}"] = full
    return found
