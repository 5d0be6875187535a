"""The branch a completed run leaves: ``snodo/<task>-<run>``, or ``snodo run --branch NAME``,
checked before anything exists.
"""

from __future__ import annotations

from pathlib import Path

from snodo.base.errors import SnodoError
from snodo.base.text import shown
from snodo.engine.jobs import JobStore
from snodo.engine.worktree import refs_with
from snodo.git.runner import run_git


def check_branch(root: Path, name: str, jobs: JobStore) -> None:
    """Refuse ``name`` for a run's branch unless git accepts it as a new branch name."""
    quoted = repr(shown(name, multiline=False)[:200])
    checked = None if name.startswith("-") else run_git(root, "check-ref-format", "--branch", name)
    if checked is None or not checked.ok or checked.stdout.strip() != name:
        raise SnodoError(f"--branch {quoted} is not a valid branch name (git check-ref-format --branch refuses it)")
    if run_git(root, "rev-parse", "--verify", "-q", f"refs/heads/{name}").ok:
        raise SnodoError(f"--branch {quoted}: a branch of that name already exists; name a new one")
    for job in jobs.list():
        if job.get("branch") == name and job.get("status") in ("queued", "running"):
            raise SnodoError(f"--branch {quoted}: job {job['job_id']} ({job['status']}) will already make it")


def made_branches(jobs: JobStore) -> dict[str, str]:
    """``refs/heads/NAME`` → commit for each ``run --branch`` branch a completed job made."""
    made: dict[str, str] = {}
    for job in jobs.list():
        result = job.get("result")
        if not isinstance(result, dict):
            continue
        name, commit = job.get("branch"), result.get("commit")
        if job.get("status") == "completed" and name and result.get("branch") == name and isinstance(commit, str):
            made[f"refs/heads/{name}"] = commit
    return made


def prune_merged(root: Path, made: dict[str, str]) -> list[dict[str, str]]:
    """Delete the task branches merged into another local branch and checked out nowhere:
    every ``snodo/*`` one, and a ``run --branch`` one only while it points where snodo left
    it (``made``); a person's own branch never. ``{branch, merged_into, commit}`` for each."""
    heads = refs_with(root, "objectname", "refs/heads")
    ours = {ref for ref, commit in heads.items() if ref.startswith("refs/heads/snodo/") or made.get(ref) == commit}
    bases = sorted(set(heads) - ours)
    listing = run_git(root, "worktree", "list", "--porcelain")
    checked_out = {line.removeprefix("branch ") for line in listing.stdout.splitlines() if line.startswith("branch ")}
    pruned: list[dict[str, str]] = []
    for ref in sorted(ours - checked_out):
        commit = heads[ref]
        base = next((b for b in bases if run_git(root, "merge-base", "--is-ancestor", commit, heads[b]).ok), None)
        if base is not None and run_git(root, "update-ref", "-d", ref, commit).ok:
            merged_into = base.removeprefix("refs/heads/")
            pruned.append({"branch": ref.removeprefix("refs/heads/"), "merged_into": merged_into, "commit": commit})
    return pruned
