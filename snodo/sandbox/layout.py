"""Which concrete paths a policy makes read-only or hidden, shared by every backend."""

from __future__ import annotations

import os
from collections.abc import Iterable, Sequence
from fnmatch import fnmatchcase
from pathlib import Path

from snodo.errors import EnvironmentProblem

#: Always read-only inside the workspace, whatever the protocol says.
ALWAYS_READ_ONLY = (".snodo", ".git")
#: Refuse to confine a workspace whose protected patterns match more paths than this (the
#: sandbox would take longer to set up than the tests take to run) ...
MAX_PROTECTED = 5_000


def _key(name: str) -> str:
    return name.casefold()


#: ... or makes it walk more directories than this to find them.
MAX_WALKED = 50_000


class _Walk:
    def __init__(self) -> None:
        self.found: list[Path] = []
        self.walked = 0


def _expand(root: Path, segments: Sequence[str], walk: _Walk) -> None:
    found = walk.found
    if not segments:
        found.append(root)
        return
    head, rest = segments[0], segments[1:]
    if len(found) > MAX_PROTECTED or walk.walked > MAX_WALKED:
        return
    walk.walked += 1
    if head == "**":
        _expand(root, rest, walk)  # zero directories
        for entry in _entries(root):
            if entry.name != ".git" and entry.is_dir(follow_symlinks=False):
                _expand(Path(entry.path), segments, walk)
        return
    has_glob = any(c in head for c in "*?[")
    for entry in _entries(root):
        if (fnmatchcase(_key(entry.name), _key(head)) if has_glob else _key(entry.name) == _key(head)) and (
            not rest or entry.is_dir(follow_symlinks=False)
        ):
            _expand(Path(entry.path), rest, walk)


def _entries(directory: Path) -> list[os.DirEntry[str]]:
    try:
        with os.scandir(directory) as it:
            return list(it)
    except OSError:
        return []


def read_only_paths(workspace: Path, patterns: Iterable[str]) -> tuple[Path, ...]:
    """Existing paths under ``workspace`` that stay read-only: ``.snodo``, ``.git`` and every
    match of the protected patterns (compared case-insensitively, as the path guard does).

    A protected path that does not exist yet cannot be mounted read-only; creating it is
    caught by the path guard after the run (see docs/security.md).
    """
    walk = _Walk()
    found = walk.found
    for pattern in (*ALWAYS_READ_ONLY, *patterns):
        segments = [s for s in pattern.split("/") if s not in ("", ".")]
        if not segments or ".." in segments:
            continue
        _expand(workspace, segments, walk)
        if len(found) > MAX_PROTECTED or walk.walked > MAX_WALKED:
            raise EnvironmentProblem(
                f"cannot confine {workspace}: finding the protected paths took more than {MAX_WALKED} "
                f"directories or matched more than {MAX_PROTECTED} paths",
                hint="narrow protected_paths in .snodo/protocol.yml (protect a directory, not each file in it)",
            )
    unique: list[Path] = []
    for path in found:
        if path not in unique and not any(p in path.parents for p in found if p != path):
            unique.append(path)
    return tuple(unique)


def carve(root: Path, excluded: Sequence[Path]) -> list[Path]:
    """Paths that together cover ``root`` minus every ``excluded`` subtree.

    Used where a backend can only *grant* access below a path (Landlock): the ancestors of
    an excluded path get no grant of their own, their other entries do. Symlinks are skipped
    (a grant on one would land on its target).
    """
    inside = [e for e in excluded if e == root or root in e.parents]
    if not inside:
        return [root]
    if root in inside:
        return []
    out: list[Path] = []
    for entry in _entries(root):
        if entry.is_symlink():
            continue
        out.extend(carve(Path(entry.path), inside))
    return out
