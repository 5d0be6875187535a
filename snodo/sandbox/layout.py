"""Which concrete paths a policy makes read-only or hidden, shared by every backend."""

from __future__ import annotations

import os
import time
from collections.abc import Iterable, Sequence
from pathlib import Path

from snodo.base.errors import EnvironmentProblem
from snodo.git.runner import run_git
from snodo.rules.guard import protecting_prefix

#: Always read-only inside the workspace, whatever the protocol says.
ALWAYS_READ_ONLY = (".snodo", ".git")
#: The most read-only mounts one sandbox takes: each protected path and each directory on
#: the way to it (see :func:`protected_parents`) is a bind mount of its own under
#: bubblewrap, which sets them up one after another at a cost that grows faster than their
#: number, paid by every confined process. Beyond this, confinement is refused with a hint
#: to protect a directory instead.
#: Only the number of *matches* counts, never the size of the repository: matches come from
#: git's index, not from a walk.
MAX_PROTECTED = 256


def _pattern_parts(pattern: str) -> tuple[str, ...] | None:
    parts = tuple(s for s in pattern.split("/") if s not in ("", "."))
    return None if not parts or ".." in parts else parts


def read_only_paths(workspace: Path, patterns: Iterable[str]) -> tuple[Path, ...]:
    """Existing paths under ``workspace`` that stay read-only: ``.snodo``, ``.git`` and every
    match of the protected patterns, compared case-insensitively with the path guard's own
    matcher (:func:`snodo.rules.guard.protecting_prefix`).

    Candidates come from one ``git ls-files --cached --others`` limited by ``:(glob,icase)``
    pathspecs: git's index and the untracked files, never a directory walk. Where a
    directory itself matches (``secrets``, ``**/secrets/**``) the directory is returned,
    not each file in it. A protected path that does not exist yet cannot be mounted
    read-only; creating it is caught by the path guard after the run (docs/security.md).
    """
    found: list[Path] = [workspace / name for name in ALWAYS_READ_ONLY if os.path.lexists(workspace / name)]
    parsed = [(raw, parts) for raw in patterns if (parts := _pattern_parts(raw)) is not None]
    if not parsed:
        return tuple(found)
    chosen = _matches(workspace, parsed)
    found.extend(workspace / rel for rel in chosen if os.path.lexists(workspace / rel))
    outer = [f"{o}/" for o in found]
    return tuple(p for p in dict.fromkeys(found) if not any(str(p).startswith(o) for o in outer))


#: (workspace, patterns) -> (what the answer depended on, the protected paths found).
_MATCHES: dict[tuple[Path, tuple[str, ...]], tuple[tuple[object, ...], tuple[str, ...]]] = {}
#: File times are kept at a coarse clock tick: a change this close to a listing may not show.
_TICK_NS = 20_000_000


def _matches(workspace: Path, parsed: Sequence[tuple[str, tuple[str, ...]]]) -> tuple[str, ...]:
    """The workspace-relative protected paths (outermost matches), listed through git once
    and reused while nothing they depend on changed (:func:`_depends_on`): a confined start
    then costs a few ``stat`` calls, not a git process. Refusals are never cached."""
    key = (workspace, tuple(raw for raw, _ in parsed))
    cached = _MATCHES.get(key)
    if cached is not None and cached[0] == _depends_on(workspace, parsed, cached[1]):
        return cached[1]

    listed_at = time.time_ns()
    keep: dict[str, None] = {}
    for rel in _candidates(workspace, [raw for raw, _ in parsed]):
        prefix = protecting_prefix([parts for _, parts in parsed], tuple(rel.split("/")))
        if prefix is not None:
            keep.setdefault("/".join(prefix))
    chosen = [p for p in keep if not any(p.startswith(o + "/") for o in keep)] if len(keep) > 1 else list(keep)
    mounts = len(chosen) + len({"/".join(p.split("/")[:i]) for p in chosen for i in range(1, p.count("/") + 1)})
    if mounts > MAX_PROTECTED:
        raise EnvironmentProblem(
            f"cannot confine {workspace}: protected_paths match {len(chosen)} separate paths, which need "
            f"{mounts} read-only mounts with their parent directories (the sandbox takes at most {MAX_PROTECTED})",
            hint="narrow protected_paths in .snodo/protocol.yml (protect a directory, not each file in it)",
        )
    stamp = _depends_on(workspace, parsed, tuple(chosen))
    if len(_MATCHES) > 64:
        _MATCHES.clear()
    # Cached only when nothing it depends on changed just before or during the listing
    # (sizes and inode numbers in the stamp are far below any time).
    if not any(isinstance(t, int) and t >= listed_at - _TICK_NS for t in stamp):
        _MATCHES[key] = (stamp, tuple(chosen))
    else:
        _MATCHES.pop(key, None)
    return tuple(chosen)


def _git_dir(workspace: Path) -> Path:
    marker = workspace / ".git"
    try:
        text = marker.read_text(encoding="utf-8", errors="replace").strip()
    except OSError:  # a directory (the usual case), or none
        return marker
    return workspace / text.removeprefix("gitdir: ").strip() if text.startswith("gitdir: ") else marker


def mtime(path: Path) -> int:
    try:
        return os.stat(path).st_mtime_ns
    except OSError:
        return -1


def _depends_on(
    workspace: Path, parsed: Sequence[tuple[str, tuple[str, ...]]], chosen: Sequence[str]
) -> tuple[object, ...]:
    """What the protected paths were found from: git's index (a file added, removed, a
    checkout), and the modification times of the directories where a new untracked match
    would appear — the workspace, the literal directories each pattern names before its
    first wildcard, and the directory of each match. A new untracked match deeper below a
    wildcard (``**/*.pem``) is found once the index changes (docs/security.md)."""
    try:
        index = os.stat(_git_dir(workspace) / "index")
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
    """Tracked and untracked paths git's pathspec engine says may match (a superset: the
    guard's matcher decides). A workspace git cannot list is refused: fail closed."""

    specs = [f":(glob,icase){p.strip('/')}{suffix}" for p in patterns for suffix in ("", "/**")]
    listing = run_git(workspace, "ls-files", "-z", "--cached", "--others", "--", *specs)
    if not listing.ok:
        raise EnvironmentProblem(
            f"cannot confine {workspace}: its protected paths are found through git, which failed: {listing.detail()}",
            hint="run governed work in a git work tree (`git init`)",
        )
    # A path can be listed twice (in the index and changed in the working copy, or once per stage).
    return list(dict.fromkeys(rel for rel in listing.stdout.split("\0") if rel))


def protected_parents(workspace: Path, paths: Iterable[Path]) -> list[Path]:
    """The directories between ``workspace`` and each read-only path, outermost first. A
    backend that binds a read-only path must stop its parents from being renamed away (a
    renamed ``config/`` and a new ``config/prod.yml`` would leave the binding behind):
    bubblewrap makes each its own mount point, which ``rename`` refuses to move."""
    parents: dict[Path, None] = {}
    for path in paths:
        for parent in reversed(path.parents):
            if parent != workspace and workspace in parent.parents:
                parents.setdefault(parent)
    return list(parents)


def _entries(directory: Path) -> list[os.DirEntry[str]]:
    try:
        with os.scandir(directory) as it:
            return list(it)
    except OSError:
        return []


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
