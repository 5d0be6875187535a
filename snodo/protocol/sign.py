"""``snodo protocol sign``: a person's signed commit of ``.snodo/``, without configuring git:
built with git's plumbing in a temporary index (what else the user staged stays staged),
signed in its ``gpgsig`` header as ``git commit -S`` does, by a callable (only
:mod:`snodo.cli.signing` reads the decision key). An empty one adopts an unsigned ``.snodo/``
change already committed."""

from __future__ import annotations

import tempfile
from collections.abc import Callable
from pathlib import Path

from attrs import frozen

from snodo.base.errors import EnvironmentProblem, StateError
from snodo.git.runner import git_out, identity_env, read_objects, run_git
from snodo.protocol.loader import SIGNERS_NAME, blob_text
from snodo.protocol.trust import GOVERNANCE_DIR, Walk


@frozen(kw_only=True)
class Plan:
    """What signing would commit: ``tree`` on ``parent``, the ``.snodo/`` paths it changes, the list that must
    name the signer (in force at ``HEAD``, or the first list itself) and, when adopting, why ``HEAD``'s is not."""

    top: Path
    parent: str | None
    tree: str
    changes: tuple[str, ...]
    signers: str | None
    first_list: bool
    adopting: str | None = None

    @property
    def nothing_to_do(self) -> bool:
        return not self.changes and self.adopting is None


def plan(top: Path, *, runtime: tuple[str, ...] = ()) -> Plan:
    """What ``snodo protocol sign`` would commit at ``top``; ``runtime``: snodo's runtime state, never committed."""
    head_result = run_git(top, "rev-parse", "--verify", "--quiet", "HEAD^{commit}")
    parent = head_result.stdout.strip() if head_result.ok and head_result.stdout.strip() else None
    tree = _tree_of_worktree(top, parent, runtime)
    empty_tree = ("hash-object", "-t", "tree", "--stdin")  # with no commit yet, .snodo/ is compared with nothing
    head_tree = git_out(top, *(("rev-parse", f"{parent}^{{tree}}") if parent else empty_tree), stdin="")
    listing = git_out(top, "diff-tree", "-r", "--no-renames", "--name-status", head_tree, tree, "--", GOVERNANCE_DIR)
    changes = tuple(line.replace("\t", " ") for line in listing.splitlines() if line.strip())
    signers = adopting = None
    if parent is not None:  # the list in force at the parent and, when nothing changes, why its .snodo/ is not
        walk = Walk(top, [parent], None)
        pending = None if changes else walk.pending(parent)
        signers, adopting = walk.after(parent).signers, pending.why if pending is not None else None
    first_list = signers is None
    if first_list:
        name = f"{tree}:{GOVERNANCE_DIR}/{SIGNERS_NAME}"
        signers = blob_text(read_objects(top, [name])[name])
    return Plan(
        top=top, parent=parent, tree=tree, changes=changes, signers=signers, first_list=first_list, adopting=adopting
    )


def _tree_of_worktree(top: Path, parent: str | None, runtime: tuple[str, ...]) -> str:
    """``parent``'s tree with ``.snodo/`` as in the working tree, its runtime state left out."""
    with tempfile.TemporaryDirectory(prefix="snodo-sign-") as scratch:
        env = {"GIT_INDEX_FILE": str(Path(scratch) / "index")}
        _git(top, env, "read-tree", *([parent] if parent else ["--empty"]))
        names = [p.rstrip("/") for p in runtime]
        excluded = [f":(exclude,glob){GOVERNANCE_DIR}/**/{n}{tail}" for n in names for tail in ("", "/**")]
        _git(top, env, "add", "-A", "--", GOVERNANCE_DIR, *excluded)
        return _git(top, env, "write-tree")


def commit(plan: Plan, message: str, sign: Callable[[bytes], str]) -> str:
    """Write the signed commit of ``plan`` and move ``HEAD`` to it if still at ``plan.parent``; returns its id."""
    top = plan.top
    ident = identity_env(top)
    author = _git(top, ident, "var", "GIT_AUTHOR_IDENT")
    committer = _git(top, ident, "var", "GIT_COMMITTER_IDENT")
    text = message.strip() + "\n"
    headers = f"tree {plan.tree}\n" + (f"parent {plan.parent}\n" if plan.parent else "")
    headers += f"author {author}\ncommitter {committer}\n"
    signature = sign(f"{headers}\n{text}".encode()).strip("\n")
    gpgsig = "gpgsig " + "\n ".join(signature.split("\n")) + "\n"
    signed = f"{headers}{gpgsig}\n{text}"
    new = git_out(top, "hash-object", "-t", "commit", "-w", "--stdin", stdin=signed)
    git_out(top, "update-ref", "-m", "snodo protocol sign", "HEAD", new, plan.parent or "")
    result = run_git(top, "reset", "-q", new, "--", GOVERNANCE_DIR)
    if not result.ok:
        raise EnvironmentProblem(
            f"commit {new[:12]} is made, but the index could not follow it: {result.detail()}",
            hint=f"run `git reset -q -- {GOVERNANCE_DIR}` yourself",
        )
    return new


def _git(top: Path, env: dict[str, str], *args: str) -> str:
    """A git command in ``env`` (a scratch index, the signer's identity) that must succeed."""
    result = run_git(top, *args, env=env)
    if not result.ok:
        raise StateError(f"git {' '.join(args[:2])} failed in {top}: {result.detail()}")
    return result.stdout.strip()
