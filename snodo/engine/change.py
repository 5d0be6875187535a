"""The engine's commits and the change a run made, at a cost that follows the change.

The agent's git tools (:mod:`snodo.workspace.git`) work on the working tree: their ``status``,
``diff`` and ``commit`` look at every tracked file. The engine needs less: it commits paths it
already knows (the coder's operations, or what the in-place watch judged), and what
post_execute judges is the committed change, base tree against tip tree. So here:

- a commit is ``add`` of the named paths, ``write-tree``, ``commit-tree`` and ``update-ref``
  (no whole-tree refresh, no hook: ``commit-tree`` runs none);
- the changed files and the diff are tree-to-tree (``diff-tree``/``diff BASE TIP``), which
  reads only the trees and blobs that differ.

What is staged is judged by the path guard before it becomes a commit, as the git tools do.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path

from snodo.gitrun import FALLBACK_IDENTITY, git_out, run_git
from snodo.workspace.guard import PathGuard

#: Pathspecs are literal paths here: a file named ``*`` stages that file only.
_LITERAL = {"GIT_LITERAL_PATHSPECS": "1"}


def commit_paths(copy: Path, guard: PathGuard, paths: Sequence[str], message: str) -> str | None:
    """Stage ``paths`` in ``copy`` and commit them on top of its HEAD; the new commit, or
    ``None`` when the paths hold no change (a file rewritten with the same content)."""
    entries = [guard.check_mutation(p, follow_symlinks=False) for p in paths]
    relative = [os.path.relpath(entry, copy) for entry in entries]
    git_out(copy, "add", "-A", "--", *relative, env=_LITERAL)
    staged = git_out(copy, "diff", "--cached", "--name-only", "--no-renames", "-z")
    if not staged:
        return None
    for path in filter(None, staged.split("\0")):  # anything staged behind the tools' back is refused
        guard.check_mutation(os.path.join(copy, path), follow_symlinks=False)
    tree = git_out(copy, "write-tree")
    commit = git_out(copy, "commit-tree", tree, "-p", "HEAD", stdin=message, env=_identity(copy))
    git_out(copy, "update-ref", "-m", "snodo: commit", "HEAD", commit)
    return commit


def _identity(copy: Path) -> dict[str, str]:
    """snodo as author and committer only for what the repository's configuration leaves unset."""
    listing = run_git(copy, "config", "--get-regexp", r"^user\.(name|email)$").stdout
    configured = {line.split(" ", 1)[0] for line in listing.splitlines() if " " in line}
    env: dict[str, str] = {}
    for key, var in (("user.name", "NAME"), ("user.email", "EMAIL")):
        if key not in configured:
            env[f"GIT_AUTHOR_{var}"] = env[f"GIT_COMMITTER_{var}"] = FALLBACK_IDENTITY[key]
    return env


def changed_files(copy: Path, base: str, tip: str) -> list[str]:
    """Files that differ between the commits ``base`` and ``tip``, sorted."""
    out = git_out(copy, "diff-tree", "-r", "--name-only", "--no-renames", "--no-commit-id", "-z", base, tip)
    return sorted(p for p in out.split("\0") if p)


def read_diff(copy: Path, base: str, tip: str) -> str:
    """The patch from ``base`` to ``tip`` (no external diff or text conversion)."""
    result = run_git(copy, "diff", "--no-color", "--no-ext-diff", "--no-textconv", base, tip, "--")
    if not result.ok:
        from snodo.errors import EnvironmentProblem

        raise EnvironmentProblem(f"git diff failed in {copy}: {result.detail()}")
    return result.stdout
