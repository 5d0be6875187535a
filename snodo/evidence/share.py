"""Reading one commit's attestation for people, and pushing attestations with the work."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from snodo.base.errors import EnvironmentProblem, SnodoError
from snodo.evidence.notes import NOTES_REF, PLAIN_GIT
from snodo.evidence.statement import EnvelopeError, decode_envelope, signer_ids
from snodo.git.runner import PUSH_TRANSPORTS, git_out, identity_args, run_git

_FETCHED = "refs/notes/snodo-fetched"


def show(repo: Path, rev: str) -> dict[str, Any]:
    """The decoded statement on ``rev`` and the key ids that claim to have signed it (unverified)."""
    sha = git_out(repo, "rev-parse", "--verify", "--end-of-options", f"{rev}^{{commit}}", env=PLAIN_GIT)
    note = run_git(repo, "notes", f"--ref={NOTES_REF}", "show", sha, env=PLAIN_GIT)
    if not note.ok:
        raise SnodoError(
            f"commit {sha[:12]} carries no attestation",
            hint=f"fetch the notes first: git fetch origin +{NOTES_REF}:{NOTES_REF}",
        )
    try:
        envelope, body = decode_envelope(note.stdout.strip())
    except EnvelopeError as exc:
        raise SnodoError(f"commit {sha[:12]}: {exc}") from None
    return {"commit": sha, "signed_by": signer_ids(envelope), "statement": body}


def push(repo: Path, remote: str, branch: str) -> list[str]:
    """Push the notes (merged with the remote's, ours first, if they moved on), then ``branch``
    (a server hook judges it by the notes it holds); returns what ran."""
    done: list[str] = []
    has_notes = run_git(repo, "rev-parse", "--verify", "--quiet", "--end-of-options", NOTES_REF).ok
    if not has_notes:
        done.append(f"no attestations to push: this repository has no {NOTES_REF} yet")
    for again in (False, True) if has_notes else ():
        done.append(f"git push {remote} {NOTES_REF}")
        pushed = run_git(repo, *PUSH_TRANSPORTS, "push", "--end-of-options", remote, NOTES_REF)
        if pushed.ok:
            break
        if again or "rejected" not in pushed.detail():
            raise _push_failed(remote, NOTES_REF, pushed.detail())
        fetched = run_git(repo, *PUSH_TRANSPORTS, "fetch", "--end-of-options", remote, f"+{NOTES_REF}:{_FETCHED}")
        if not fetched.ok:
            raise EnvironmentProblem(f"the remote's notes moved on and cannot be fetched: {_said(fetched.detail())}")
        git_out(repo, *identity_args(repo), "notes", f"--ref={NOTES_REF}", "merge", "--strategy=ours", _FETCHED)
        done.append(f"git notes merge --strategy=ours (the remote's {NOTES_REF})")
    sent = run_git(repo, *PUSH_TRANSPORTS, "push", "--end-of-options", remote, f"refs/heads/{branch}")
    if not sent.ok:
        raise _push_failed(remote, f"refs/heads/{branch}", sent.detail())
    done.append(f"git push {remote} refs/heads/{branch}")
    return done


def _said(detail: str) -> str:
    """git's explanation on one line, without its ``error:``/``remote:``/``hint:`` prefixes."""
    lines = []
    for line in detail.splitlines():
        text = line.strip()
        for prefix in ("error:", "remote:", "fatal:", "hint:", "To "):
            if text.startswith(prefix):
                text = "" if prefix == "To " else text.removeprefix(prefix).strip()
        if text and text not in lines:
            lines.append(text)
    return "; ".join(lines) or detail.strip()


def _push_failed(remote: str, ref: str, detail: str) -> SnodoError:
    """The remote refused ``ref`` (exit 1), or git could not push at all (exit 4)."""
    said = _said(detail)
    if "rejected" in detail or "declined" in detail or "hook" in detail:
        refused = SnodoError(
            f"{remote} refused {ref}: {said}",
            hint="the remote's hook judged it (`snodo verify` shows why), or fetch and integrate its changes first",
        )
        refused.exit_code = 1  # set on the error itself: a refusal, which the command line keeps as 1
        return refused
    return EnvironmentProblem(f"could not push {ref} to {remote}: {said}")
