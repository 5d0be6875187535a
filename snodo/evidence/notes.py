"""Attestations as git notes under ``refs/notes/snodo``: written one commit at a time, read
for a range in one ``git log`` split on a random marker per call (no note can forge a boundary).
"""

from __future__ import annotations

import secrets
import time
from pathlib import Path

from attrs import frozen

from snodo.base.errors import EnvironmentProblem
from snodo.git.runner import OBJECTS_ONLY, identity_args, run_git

NOTES_REF = "refs/notes/snodo"
#: Replacement refs and grafts would let a repository show one commit as another (a graft
#: file, ``info/grafts``, is read even with replacement refs off: it is named away).
PLAIN_GIT = {**OBJECTS_ONLY, "GIT_NOTES_REF": NOTES_REF}
_LOCK_RETRIES = 5


def write_note(repo: Path, commit: str, text: str) -> None:
    """Attach ``text`` to ``commit``, replacing any note there."""
    args = [*identity_args(repo), "notes", f"--ref={NOTES_REF}", "add", "--force", "--file=-", commit]
    for attempt in range(_LOCK_RETRIES):
        result = run_git(repo, *args, stdin=text + "\n", env=PLAIN_GIT)
        if result.ok:
            return
        if "lock" not in result.detail() or attempt == _LOCK_RETRIES - 1:
            break
        time.sleep(0.05 * (attempt + 1))  # another run is writing its note at the same moment
    raise EnvironmentProblem(f"cannot attach the attestation to {commit[:12]} in {repo}: {result.detail()}")


@frozen(kw_only=True)
class CommitEntry:
    sha: str
    tree: str
    parents: tuple[str, ...]
    subject: str
    note: str  # "" for none


def list_range(repo: Path, revisions: list[str]) -> list[CommitEntry]:
    """Every commit of ``revisions`` (``git rev-list`` syntax), newest first."""
    marker = secrets.token_hex(16)
    fmt = f"{marker}C%H %T %P%n%s%n{marker}N%N{marker}E"
    result = run_git(
        repo, "log", f"--notes={NOTES_REF}", "--no-color", f"--format={fmt}", *revisions, "--", env=PLAIN_GIT
    )
    if not result.ok:
        raise EnvironmentProblem(f"cannot list {' '.join(revisions)} in {repo}: {result.detail()}")
    entries = []
    for chunk in result.stdout.split(f"{marker}C")[1:]:
        head, _, rest = chunk.partition(f"{marker}N")
        note, _, _ = rest.partition(f"{marker}E")
        ids, _, subject = head.partition("\n")
        sha, tree, *parents = ids.split()
        entries.append(CommitEntry(sha=sha, tree=tree, parents=tuple(parents), subject=subject.strip(), note=note))
    return entries
