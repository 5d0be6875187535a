"""The branch a completed run leaves: ``snodo/<task>-<run>``, or the name given with
``snodo run --branch NAME``.

A named branch is checked before anything exists (no job record, no working copy, no
token, no audit event): a name git would refuse, one that ``git check-ref-format --branch``
would rewrite (``@{-1}``), an existing branch, or one a live job is already waiting to make
is a one-line error. Only completed work gets the name; a halted run's commits go under
``refs/snodo/halted/`` as always, and the job record keeps the name for ``--resume``.

``snodo jobs prune`` deletes a merged named branch only when a job record says snodo made
it and it still points where snodo left it (:func:`made_branches`): a branch a person made
or moved on is theirs.
"""

from __future__ import annotations

from pathlib import Path

from snodo.base.errors import SnodoError
from snodo.base.text import shown
from snodo.engine.jobs import JobStore
from snodo.git.runner import run_git

_LIVE = ("queued", "running")


def check_branch(root: Path, name: str, jobs: JobStore) -> None:
    """Refuse ``name`` for a run's branch unless git accepts it as a new branch name."""
    quoted = repr(shown(name, multiline=False)[:200])
    checked = None if name.startswith("-") else run_git(root, "check-ref-format", "--branch", name)
    if checked is None or not checked.ok or checked.stdout.strip() != name:
        raise SnodoError(f"--branch {quoted} is not a valid branch name (git check-ref-format --branch refuses it)")
    if run_git(root, "rev-parse", "--verify", "-q", f"refs/heads/{name}").ok:
        raise SnodoError(f"--branch {quoted}: a branch of that name already exists; name a new one")
    for job in jobs.list():
        if job.get("branch") == name and job.get("status") in _LIVE:
            raise SnodoError(f"--branch {quoted}: job {job['job_id']} ({job['status']}) will already make it")


def made_branches(jobs: JobStore) -> dict[str, str]:
    """``refs/heads/NAME`` → commit for each branch a completed job was asked to name and
    made (``run --branch``), from the job records."""
    made: dict[str, str] = {}
    for job in jobs.list():
        result = job.get("result")
        if not isinstance(result, dict):
            continue
        name, commit = job.get("branch"), result.get("commit")
        if job.get("status") == "completed" and name and result.get("branch") == name and isinstance(commit, str):
            made[f"refs/heads/{name}"] = commit
    return made
