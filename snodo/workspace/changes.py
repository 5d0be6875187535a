"""The change set ``snodo validate --phase post_execute`` judges in place: everything that
differs from a base commit, untracked files included (as git would print them), ignored ones
and ``.snodo/`` left out.
"""

from __future__ import annotations

import os
from pathlib import Path

from attrs import frozen

from snodo.base.errors import SnodoError, ToolError
from snodo.rules.guard import PathGuard
from snodo.workspace.git import Git

# git's well-known empty tree: the base of a repository that has no commit yet.
EMPTY_TREE = "4b825dc642cb6eb9a060e54bf8d69288fbee4904"
MAX_UNTRACKED_BYTES = 512_000  # per untracked file shown in the diff; larger ones are named only
_STATE_DIR = ".snodo/"


@frozen(kw_only=True)
class ChangeSet:
    base: str
    changed_files: tuple[str, ...]
    diff: str


def working_tree_changes(root: Path, base: str = "HEAD") -> ChangeSet:
    """Files and patch that differ from ``base`` in the work tree at ``root``."""
    git = Git(root, PathGuard(root))
    if not git.is_repo():
        raise SnodoError(
            f"{root} is not a git work tree, so there is no change set to validate after the work",
            hint="run `git init` and commit a base, or validate before the work (--phase pre_execute)",
        )
    ref = EMPTY_TREE if base == "HEAD" and git.head() is None else base  # no commit yet: every file is the change
    environments = tuple(f"{name}/" for name in python_environments(git.root))
    try:
        files = [f for f in git.changed_files(ref) if not f.startswith((_STATE_DIR, *environments))]
        tracked_diff = git.read_diff(ref)
    except ToolError as exc:
        raise SnodoError(
            f"cannot compute the change set against {base!r}: {exc}",
            hint="pass --base with a commit, branch or tag that exists (default HEAD)",
        ) from None
    shown, tracked = _split_diff(tracked_diff)
    untracked = [_new_file_patch(git.root, rel) for rel in files if rel not in tracked]
    return ChangeSet(base=base, changed_files=tuple(files), diff=shown + "".join(untracked))


def python_environments(root: Path) -> list[str]:
    """Top-level directories of ``root`` holding a ``pyvenv.cfg``: never part of the work, tracked or not."""
    try:
        with os.scandir(root) as listing:
            return sorted(
                e.name
                for e in listing
                if e.is_dir(follow_symlinks=False) and os.path.isfile(os.path.join(e.path, "pyvenv.cfg"))
            )
    except OSError:
        return []


def _split_diff(diff: str) -> tuple[str, set[str]]:
    """The diff without the sections of files under ``.snodo/``, and the paths it has a section for."""
    kept: list[str] = []
    paths: set[str] = set()
    keep = True
    for line in diff.splitlines(keepends=True):
        if line.startswith("diff --git "):
            keep = not line.startswith(f"diff --git a/{_STATE_DIR}")
        if line.startswith("diff --git a/"):
            paths.add(line.splitlines()[0].removeprefix("diff --git a/").split(" b/", 1)[0])
        if keep:
            kept.append(line)
    return "".join(kept), paths


def _new_file_patch(root: Path, rel: str) -> str:
    """The patch git would show for adding the untracked file ``rel``."""
    path = os.path.join(root, rel)
    header = f"diff --git a/{rel} b/{rel}\nnew file mode 100644\n"
    try:
        if os.path.islink(path) or not os.path.isfile(path):
            return header + f"--- /dev/null\n+++ b/{rel}\n@@ -0,0 +1 @@\n+(not a regular file)\n"
        size = os.path.getsize(path)
        if size > MAX_UNTRACKED_BYTES:
            return header + f"Binary files /dev/null and b/{rel} differ ({size} bytes, too large to show)\n"
        with open(path, "rb") as fh:
            data = fh.read()
    except OSError as exc:
        return header + f"(unreadable: {exc.strerror})\n"
    if b"\0" in data:
        return header + f"Binary files /dev/null and b/{rel} differ\n"
    text = data.decode("utf-8", errors="replace")
    lines = text.splitlines()
    if not lines:
        return header
    body = "".join(f"+{line}\n" for line in lines)
    tail = "" if text.endswith("\n") else "\\ No newline at end of file\n"
    return header + f"--- /dev/null\n+++ b/{rel}\n@@ -0,0 +1,{len(lines)} @@\n" + body + tail
