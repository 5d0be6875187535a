"""Reading one commit's attestation for people, and pushing attestations with the work."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from snodo.errors import EnvironmentProblem, SnodoError
from snodo.evidence.notes import NOTES_REF, PLAIN_GIT, read_note
from snodo.evidence.statement import EnvelopeError, decode_envelope, signer_ids
from snodo.gitrun import PUSH_TRANSPORTS, git_out, identity_args, run_git

_FETCHED = "refs/notes/snodo-fetched"


def show(repo: Path, rev: str) -> dict[str, Any]:
    """The decoded statement on ``rev`` and the key ids that claim to have signed it.

    Unverified: ``snodo verify`` judges it against a base's trust root."""
    sha = git_out(repo, "rev-parse", "--verify", "--end-of-options", f"{rev}^{{commit}}", env=PLAIN_GIT)
    note = read_note(repo, sha)
    if note is None:
        raise SnodoError(
            f"commit {sha[:12]} carries no attestation",
            hint=f"fetch the notes first: git fetch origin +{NOTES_REF}:{NOTES_REF}",
        )
    try:
        envelope, body = decode_envelope(note.strip())
    except EnvelopeError as exc:
        raise SnodoError(f"commit {sha[:12]}: {exc}") from None
    return {"commit": sha, "signed_by": signer_ids(envelope), "statement": body}


def push(repo: Path, remote: str, branch: str) -> list[str]:
    """Push the notes, then ``branch`` (a server hook judges the branch by the notes it
    already holds). When the remote's notes moved on (a teammate pushed theirs), merge them
    in (ours wins for the same commit) and push again. Returns what ran."""
    done = [f"git push {remote} {NOTES_REF}"]
    pushed = run_git(repo, *PUSH_TRANSPORTS, "push", "--end-of-options", remote, NOTES_REF)
    if not pushed.ok:
        if "rejected" not in pushed.detail():
            raise EnvironmentProblem(f"git push {remote} {NOTES_REF} failed: {pushed.detail()}")
        fetched = run_git(repo, *PUSH_TRANSPORTS, "fetch", "--end-of-options", remote, f"+{NOTES_REF}:{_FETCHED}")
        if not fetched.ok:
            raise EnvironmentProblem(f"the remote's notes moved on and cannot be fetched: {fetched.detail()}")
        git_out(repo, *identity_args(repo), "notes", f"--ref={NOTES_REF}", "merge", "--strategy=ours", _FETCHED)
        done.append(f"git notes merge --strategy=ours (the remote's {NOTES_REF})")
        git_out(repo, *PUSH_TRANSPORTS, "push", "--end-of-options", remote, NOTES_REF)
        done.append(f"git push {remote} {NOTES_REF}")
    git_out(repo, *PUSH_TRANSPORTS, "push", "--end-of-options", remote, f"refs/heads/{branch}")
    done.append(f"git push {remote} refs/heads/{branch}")
    return done
