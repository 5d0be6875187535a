"""The engine's commits and the change a run made, at a cost that follows the change.

The engine commits paths it already knows (the coder's operations, or what the in-place
watch judged), each judged by the path guard before it is staged and again as part of the
whole change (a refusal moves HEAD back); post_execute judges the committed change, base tree
against tip tree, from one ``diff --patch-with-raw``. How: docs/architecture.md, "The life
cycle of a task's work".
"""

from __future__ import annotations

import os
import zlib
from collections.abc import Sequence
from pathlib import Path

from attrs import frozen

from snodo.base.errors import EnvironmentProblem, SnodoError
from snodo.engine.pool import REF_BASE, REF_INDEX, STAT_TRUST, detached_head, install_index
from snodo.git.runner import GitContext, git_out, identity_env, pin, run_git
from snodo.rules.guard import PathGuard

#: Pathspecs are literal paths here: a file named ``*`` stages that file only.
_LITERAL = {"GIT_LITERAL_PATHSPECS": "1"}


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
    gitdir = str(context.git_dir) if context is not None else ""
    parent = _head(copy, gitdir)
    seed = _seed_index(gitdir, parent) if gitdir else None
    if seed is not None:
        made = _plumbed(copy, Path(gitdir), seed, relative, message, parent, base)
    else:
        made = _porcelain(copy, context, relative, message, parent, base)
    if made is None:
        return None
    commit, tree, (files, diff) = made
    _recheck(copy, guard, files, parent, commit)
    _PARENTS[commit] = parent
    if tree:
        _TREES[commit] = tree
    return Commit(commit=commit, tree=tree or None, files=files, diff=diff)


def _recheck(copy: Path, guard: PathGuard, files: tuple[str, ...], parent: str, commit: str) -> None:
    """Judge every path of the whole change again (the ones just staged, and those an earlier
    attempt committed); a refusal moves HEAD back to ``parent``."""
    try:
        for path in files:
            guard.check_mutation(os.path.join(copy, path), follow_symlinks=False)
    except SnodoError:
        git_out(copy, "update-ref", "-m", "snodo: refused", "HEAD", parent, commit)
        raise


_Made = tuple[str, str, tuple[tuple[str, ...], str]]

#: The index of the engine's last commit in a copy (its tree, the restore's stat data for
#: every other file), kept under a name git does not know, and the commit it holds.
COMMIT_INDEX = "snodo-commit.index"
COMMIT_BASE = "snodo-commit.base"


def _seed_index(gitdir: str, parent: str) -> Path | None:
    """An index snodo wrote that holds exactly ``parent``'s tree: the last restore's (when
    ``parent`` is the base it restored) or the engine's last commit's. ``None`` otherwise
    (a coder's own commit, a copy that is not pooled)."""
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
    copy: Path, gitdir: Path, seed: Path, relative: list[str], message: str, parent: str, base: str
) -> _Made | None:
    """The commit built with plumbing: the named paths added to a copy of ``seed``, its tree,
    a commit of it (no hook) and HEAD moved there from ``parent``; that index then becomes
    the copy's own, so ``status`` in the copy shows the commit."""
    work = gitdir / f"{COMMIT_INDEX}.work"
    install_index(seed, work)  # git replaces it when it writes: the seed stays as it is
    own = {"GIT_INDEX_FILE": str(work)}
    stdin = "".join(f"{path}\0" for path in relative)
    git_out(copy, *STAT_TRUST, "update-index", "--add", "--remove", "-z", "--stdin", stdin=stdin, env=own)
    tree = git_out(copy, *STAT_TRUST, "write-tree", env=own)
    if _TREES.get(parent) == tree:
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
    return made, tree, compared


def _move_head(copy: Path, gitdir: Path, made: str, parent: str) -> None:
    """Move the copy's HEAD from ``parent`` to ``made``: a pooled copy's detached HEAD (a file
    only this run uses) by a rename, as git's own ref update does; anything else through git."""
    if detached_head(str(gitdir)) == parent:
        tmp = gitdir / "HEAD.snodo-tmp"
        tmp.write_text(f"{made}\n", encoding="ascii")
        os.replace(tmp, gitdir / "HEAD")
    else:
        git_out(copy, "update-ref", "-m", "snodo: commit", "HEAD", made, parent)


def _porcelain(
    copy: Path, context: GitContext | None, relative: list[str], message: str, parent: str, base: str
) -> _Made | None:
    """The commit with ``add`` and ``commit --only`` (no hook), when no index snodo wrote
    holds the parent's tree."""
    gitdir = str(context.git_dir) if context is not None else ""
    git_out(copy, "add", "-A", "--", *relative, env=_LITERAL)
    made = run_git(copy, *_COMMIT, *relative, stdin=message, env={**identity_env(copy), **_LITERAL, "LC_ALL": "C"})
    commit = _head(copy, gitdir)
    if not made.ok:
        said = made.stdout + made.stderr
        if made.returncode == 1 and commit == parent and any(n in said for n in _NOTHING):
            return None
        raise EnvironmentProblem(f"git commit failed in {copy}: {made.detail()}")
    tree = _tree_of(context.common_dir() if context is not None else None, commit) or ""
    return commit, tree, compare(copy, base, commit)


#: ``git commit`` as the engine makes one: no hook, the message as given, only the named paths.
_COMMIT = ("commit", "-q", "--cleanup=verbatim", "--no-edit", "-F", "-", "--only", "--")
#: What ``git commit`` says (LC_ALL=C) when the named paths hold no change.
_NOTHING = ("nothing to commit", "nothing added to commit", "no changes added to commit")

#: The tree and parent of each commit the engine made: a commit never changes.
_TREES: dict[str, str] = {}
_PARENTS: dict[str, str] = {}


def made_since(base: str, tip: str | None) -> list[tuple[str, str]] | None:
    """The commits of ``base..tip`` with their trees, oldest first, when this process made
    every one of them (``None`` otherwise: a coder's own commit, a run of another process)."""
    chain: list[tuple[str, str]] = []
    while tip is not None and tip != base:
        if tip not in _PARENTS or tip not in _TREES:
            return None
        chain.append((tip, _TREES[tip]))
        tip = _PARENTS[tip]
    return chain[::-1] if tip == base and chain else None


def _head(copy: Path, gitdir: str) -> str:
    """The commit the copy's HEAD names: read from the git directory snodo made for it,
    else asked."""
    return (detached_head(gitdir) if gitdir else None) or git_out(copy, "rev-parse", "--verify", "HEAD^{commit}")


def _tree_of(common: Path | None, commit: str) -> str | None:
    """The tree a freshly made commit names, from its loose object (git writes a new commit
    loose); ``None`` when it is not there to read."""
    if common is None or len(commit) not in (40, 64):
        return None
    try:
        raw = zlib.decompress((common / "objects" / commit[:2] / commit[2:]).read_bytes())
    except (OSError, zlib.error):
        return None
    header, _, body = raw.partition(b"\0")
    line = body.split(b"\n", 1)[0]
    if not header.startswith(b"commit ") or not line.startswith(b"tree "):
        return None
    tree = line[5:].decode("ascii", "replace")
    return tree if len(tree) == len(commit) and all(c in "0123456789abcdef" for c in tree) else None


def compare(copy: Path, base: str, tip: str) -> tuple[tuple[str, ...], str]:
    """The files that differ between the commits ``base`` and ``tip`` (sorted; a rename
    names both paths) and the patch between them, from one ``git diff``."""
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
