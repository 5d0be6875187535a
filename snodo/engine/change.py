"""The engine's commits and the change a run made, at a cost that follows the change; each
path is judged by the path guard before it is staged and again as part of the whole change."""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path

from attrs import frozen

from snodo.base.errors import EnvironmentProblem, SnodoError
from snodo.engine.pool import REF_BASE, REF_INDEX, STAT_TRUST, detached_head, install_index
from snodo.git.runner import git_out, identity_env, pin, run_git
from snodo.rules.guard import PathGuard


@frozen(kw_only=True)
class Commit:
    """A commit the engine made, with what the whole run changed up to it (base to it)."""

    commit: str
    tree: str | None
    files: tuple[str, ...]
    diff: str


def commit_paths(copy: Path, guard: PathGuard, paths: Sequence[str], message: str, *, base: str) -> Commit | None:
    """Stage ``paths`` in ``copy`` and commit exactly them on top of its HEAD (nothing staged
    behind the tools' back is part of it); the new commit and the change from ``base`` to
    it, or ``None`` when the paths hold no change (a file rewritten with the same content)."""
    entries = [guard.check_mutation(p, follow_symlinks=False) for p in paths]
    relative = [os.path.relpath(entry, copy) for entry in entries]
    context = pin(copy)
    if context is None:
        raise EnvironmentProblem(f"{copy} is not a git working copy")
    made = _plumbed(copy, context.git_dir, relative, message, base)
    if made is None:
        return None
    commit, parent, tree, (files, diff) = made
    try:  # every path of the whole change judged again; a refusal moves HEAD back
        for path in files:
            guard.check_mutation(os.path.join(copy, path), follow_symlinks=False)
    except SnodoError:
        git_out(copy, "update-ref", "-m", "snodo: refused", "HEAD", parent, commit)
        raise
    _PARENTS[commit] = parent
    _TREES[commit] = tree
    return Commit(commit=commit, tree=tree, files=files, diff=diff)


#: The index of the engine's last commit in a copy (its tree, the restore's stat data for
#: every other file), kept under a name git does not know, and the commit it holds.
COMMIT_INDEX = "snodo-commit.index"
COMMIT_BASE = "snodo-commit.base"


def _seed_index(gitdir: str, parent: str) -> Path | None:
    """An index snodo wrote holding exactly ``parent``'s tree (the last restore's or commit's), or ``None``."""
    for index, recorded in ((COMMIT_INDEX, COMMIT_BASE), (REF_INDEX, REF_BASE)):
        try:
            with open(os.path.join(gitdir, recorded), encoding="ascii") as fh:
                if fh.read(100).strip() != parent:
                    continue
        except (OSError, UnicodeDecodeError):
            continue
        path = Path(gitdir) / index
        if path.is_file() and not path.is_symlink():
            return path
    return None


def _plumbed(
    copy: Path, gitdir: Path, relative: list[str], message: str, base: str
) -> tuple[str, str, str, tuple[tuple[str, ...], str]] | None:
    """The commit of the named paths on HEAD, built with plumbing (docs/architecture.md, "The
    life cycle of a task's work"); ``None``: no change."""
    parent = detached_head(str(gitdir)) or git_out(copy, "rev-parse", "--verify", "HEAD^{commit}")
    work = gitdir / f"{COMMIT_INDEX}.work"
    own = {"GIT_INDEX_FILE": str(work)}
    seed = _seed_index(str(gitdir), parent)
    if seed is not None:
        install_index(seed, work)  # git replaces it when it writes: the seed stays as it is
    else:  # a coder's own commit: nothing it wrote in the index is trusted
        git_out(copy, "read-tree", parent, env=own)
    stdin = "".join(f"{path}\0" for path in relative)
    git_out(copy, *STAT_TRUST, "update-index", "--add", "--remove", "-z", "--stdin", stdin=stdin, env=own)
    tree = git_out(copy, *STAT_TRUST, "write-tree", env=own)
    if tree == (_TREES.get(parent) if seed is not None else git_out(copy, "rev-parse", f"{parent}^{{tree}}")):
        os.unlink(work)
        return None
    made = git_out(copy, "commit-tree", tree, "-p", parent, "-F", "-", stdin=message, env=identity_env(copy))
    compared = compare(copy, base, made)
    if parent == base and not compared[0]:
        os.unlink(work)
        return None  # the paths hold no change (an unreachable commit object is left, as git does)
    _move_head(copy, gitdir, made, parent)
    install_index(work, gitdir / "index")
    os.replace(work, gitdir / COMMIT_INDEX)
    with open(gitdir / COMMIT_BASE, "w", encoding="ascii") as fh:
        fh.write(made)
    return made, parent, tree, compared


def _move_head(copy: Path, gitdir: Path, made: str, parent: str) -> None:
    """Move HEAD from ``parent`` to ``made``: a detached one (only this run's) by a rename, as git does."""
    if detached_head(str(gitdir)) == parent:
        tmp = gitdir / "HEAD.snodo-tmp"
        tmp.write_text(f"{made}\n", encoding="ascii")
        os.replace(tmp, gitdir / "HEAD")
    else:
        git_out(copy, "update-ref", "-m", "snodo: commit", "HEAD", made, parent)


#: The tree and parent of each commit the engine made: a commit never changes.
_TREES: dict[str, str] = {}
_PARENTS: dict[str, str] = {}


def made_since(base: str, tip: str | None) -> list[tuple[str, str]] | None:
    """The commits of ``base..tip`` with their trees, oldest first, if this process made them all."""
    chain: list[tuple[str, str]] = []
    while tip is not None and tip != base:
        if tip not in _PARENTS or tip not in _TREES:
            return None
        chain.append((tip, _TREES[tip]))
        tip = _PARENTS[tip]
    return chain[::-1] if tip == base and chain else None


def compare(copy: Path, base: str, tip: str) -> tuple[tuple[str, ...], str]:
    """The files ``base`` and ``tip`` differ in (sorted; a rename names both) and the patch, from one diff."""
    args = ("diff", "--no-color", "--no-ext-diff", "--no-textconv", "--patch-with-raw", "-z", base, tip, "--")
    result = run_git(copy, *args)
    if not result.ok:
        raise EnvironmentProblem(f"git diff failed in {copy}: {result.detail()}")
    out, at, files = result.stdout, 0, set()
    while out.startswith(":", at):  # `:modes ids STATUS\0path\0` (a rename or copy: two paths)
        meta_end = out.index("\0", at)
        status = out[at:meta_end].split()[-1][:1]
        first_end = out.index("\0", meta_end + 1)
        paths = [out[meta_end + 1 : first_end]]
        at = first_end + 1
        if status in "RC":
            second_end = out.index("\0", at)
            paths = [*paths, out[at:second_end]] if status == "R" else [out[at:second_end]]
            at = second_end + 1
        files.update(paths)
    if out.startswith("\0", at):
        at += 1
    return tuple(sorted(files)), out[at:]
