"""Which concrete paths a policy makes read-only, for every backend (docs/security.md,
"Finding the protected paths")."""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Hashable, Iterable, Sequence
from pathlib import Path
from typing import Any, TypeVar

from snodo.base.errors import EnvironmentProblem
from snodo.git.runner import run_git
from snodo.rules.guard import protecting_prefix

#: Always read-only inside the workspace, whatever the protocol says.
ALWAYS_READ_ONLY = (".snodo", ".git")
#: The most read-only mounts (protected paths and their parents): their cost in bubblewrap grows faster.
MAX_PROTECTED = 256
V = TypeVar("V")


def _pattern_parts(pattern: str) -> tuple[str, ...] | None:
    parts = tuple(s for s in pattern.split("/") if s not in ("", "."))
    return None if not parts or ".." in parts else parts


def _outermost(paths: Iterable[str]) -> list[str]:
    """``paths`` once each, without those below another of them."""
    unique = list(dict.fromkeys(paths))
    return [p for p in unique if not any(p.startswith(f"{o}/") for o in unique)]


def read_only_paths(workspace: Path, patterns: Iterable[str]) -> tuple[Path, ...]:
    """Existing paths under ``workspace`` that stay read-only: ``.snodo``, ``.git`` and the
    outermost matches of the protected patterns (found through git, matched by the path guard)."""
    found = [workspace / name for name in ALWAYS_READ_ONLY]
    parsed = [(raw, parts) for raw in patterns if (parts := _pattern_parts(raw)) is not None]
    if parsed:
        found += [workspace / rel for rel in _matches(workspace, parsed)]
    return tuple(Path(p) for p in _outermost(str(p) for p in found if os.path.lexists(p)))


_MATCHES: dict[tuple[Path, tuple[str, ...]], tuple[tuple[object, ...], tuple[str, ...]]] = {}
#: File times are kept at a coarse clock tick: a change this close to a listing may not show.
_TICK_NS = 20_000_000


def _matches(workspace: Path, parsed: Sequence[tuple[str, tuple[str, ...]]]) -> tuple[str, ...]:
    """The workspace-relative protected paths, reused while nothing they depend on changed."""
    key = (workspace, tuple(raw for raw, _ in parsed))
    cached = _MATCHES.get(key)
    if cached is not None and cached[0] == _depends_on(workspace, parsed, cached[1]):
        return cached[1]
    listed_at = time.time_ns()
    chosen = _find(workspace, parsed)
    stamp = _depends_on(workspace, parsed, chosen)
    if len(_MATCHES) > 64:
        _MATCHES.clear()
    # Cached only when nothing it depends on changed just before or during the listing.
    if any(isinstance(t, int) and t >= listed_at - _TICK_NS for t in stamp):
        _MATCHES.pop(key, None)
    else:
        _MATCHES[key] = (stamp, chosen)
    return chosen


def _find(workspace: Path, parsed: Sequence[tuple[str, tuple[str, ...]]]) -> tuple[str, ...]:
    patterns = [parts for _, parts in parsed]
    candidates = _candidates(workspace, [raw for raw, _ in parsed])
    prefixes = (protecting_prefix(patterns, tuple(rel.split("/"))) for rel in candidates)
    chosen = tuple(_outermost("/".join(prefix) for prefix in prefixes if prefix is not None))
    mounts = len(chosen) + len(protected_parents(workspace, [workspace / rel for rel in chosen]))
    if mounts > MAX_PROTECTED:
        raise EnvironmentProblem(
            f"cannot confine {workspace}: protected_paths match {len(chosen)} separate paths, which need "
            f"{mounts} read-only mounts with their parent directories (the sandbox takes at most {MAX_PROTECTED})",
            hint="narrow protected_paths in .snodo/protocol.yml (protect a directory, not each file in it)",
        )
    return chosen


def linked_git_dir(workspace: Path) -> Path | None:
    """The git directory the workspace's ``.git`` file names (a linked worktree's)."""
    marker = workspace / ".git"
    try:  # a directory is the usual case; never a FIFO a confined process left there
        text = marker.read_text(encoding="utf-8", errors="replace").strip() if marker.is_file() else ""
    except OSError:
        return None
    if not text.startswith("gitdir: "):
        return None
    return Path(os.path.realpath(workspace / text.removeprefix("gitdir: ").strip()))


def remembered(cache: dict[Any, tuple[Any, V]], key: Hashable, stamp: object, make: Callable[[], V]) -> V:
    """``make()``, remembered under ``key`` while ``stamp`` (what it was made from) is unchanged."""
    hit = cache.get(key)
    if hit is not None and hit[0] == stamp:
        return hit[1]
    value = make()
    if len(cache) > 64:
        cache.clear()
    cache[key] = (stamp, value)
    return value


def mtime(path: Path) -> int:
    try:
        return os.stat(path).st_mtime_ns
    except OSError:
        return -1


def _depends_on(
    workspace: Path, parsed: Sequence[tuple[str, tuple[str, ...]]], chosen: Sequence[str]
) -> tuple[object, ...]:
    """What the protected paths were found from: git's index, and the modification times of
    the directories where a new untracked match would appear."""
    try:
        index = os.stat((linked_git_dir(workspace) or workspace / ".git") / "index")
        stamp: list[object] = [index.st_ino, index.st_size, index.st_mtime_ns]
    except OSError:
        stamp = [-1]
    dirs = {workspace}
    for _, parts in parsed:
        at = workspace
        for part in parts[:-1]:
            if any(c in part for c in "*?["):
                break
            at = at / part
            dirs.add(at)
    dirs.update((workspace / rel).parent for rel in chosen)
    stamp.extend(mtime(d) for d in sorted(dirs))
    return tuple(stamp)


def _candidates(workspace: Path, patterns: Sequence[str]) -> list[str]:
    """Tracked and untracked paths git says may match (a superset: the guard decides)."""
    specs = [f":(glob,icase){p.strip('/')}{suffix}" for p in patterns for suffix in ("", "/**")]
    listing = run_git(workspace, "ls-files", "-z", "--cached", "--others", "--", *specs)
    if not listing.ok:
        raise EnvironmentProblem(
            f"cannot confine {workspace}: its protected paths are found through git, which failed: {listing.detail()}",
            hint="run governed work in a git work tree (`git init`)",
        )
    return [rel for rel in listing.stdout.split("\0") if rel]


def protected_parents(workspace: Path, paths: Iterable[Path]) -> list[Path]:
    """The directories between ``workspace`` and each read-only path, outermost first (kept in
    place: a renamed ``config/`` would leave the binding behind)."""
    parents: dict[Path, None] = {}
    for path in paths:
        for parent in reversed(path.parents):
            if parent != workspace and workspace in parent.parents:
                parents.setdefault(parent)
    return list(parents)


def carve(root: Path, excluded: Sequence[Path]) -> list[Path]:
    """Paths that cover ``root`` minus every ``excluded`` subtree, for Landlock (which only
    *grants*). Symlinks are skipped (a grant lands on the target)."""
    inside = [e for e in excluded if e.is_relative_to(root)]
    if not inside:
        return [root]
    if root in inside:
        return []
    try:
        with os.scandir(root) as it:
            entries = list(it)
    except OSError:
        return []
    return [path for entry in entries if not entry.is_symlink() for path in carve(Path(entry.path), inside)]
