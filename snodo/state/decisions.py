"""Signed human decisions: ``<project>/.snodo/decisions/<decision_id>.json``.

A decision record is what lets a ``warn`` count as a pass (SPEC §3), so it must be
unforgeable by anything but ``snodo authorize``: it is signed with the user's Ed25519 key
(see :mod:`snodo.authorize_signing`) and only counts while its signature verifies against
the public key and it is bound to exactly the task and spec being validated. Records that
fail are not errors for the run; they are ignored and handed back so the caller can audit
them.
"""

from __future__ import annotations

import base64
import binascii
import re
from datetime import UTC, datetime
from pathlib import Path
from typing import Literal

from attrs import frozen
from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey

from snodo.errors import DecisionError, StateError
from snodo.state.atomic import atomic_create_bytes, canonical_json, dumps_json, load_record, unstructure
from snodo.state.home import project_state_dir
from snodo.state.keys import load_decision_public_key, public_key_fingerprint
from snodo.state.sessions import PendingDecision

Decision = Literal["approve", "reject"]
_DECISION_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,127}$")
# Prefixed to the signed bytes so a signature over a decision can never be replayed as a
# signature over some other snodo document that happens to share the JSON shape.
_SIGNING_CONTEXT = b"snodo decision record v1\n"


@frozen(kw_only=True)
class DecisionRecord:
    """A human's verdict on one escalation. Unsigned until ``sign_decision`` fills the
    last two fields."""

    decision_id: str
    task_id: str
    spec_sha256: str
    mode: str
    decision: Decision
    adjudicated_validators: tuple[str, ...]
    justification: str
    decided_by: str
    decided_at: str
    public_key_fingerprint: str = ""
    signature: str = ""

    def signing_bytes(self) -> bytes:
        """What the signature covers: every field but the signature itself."""
        fields = unstructure(self)
        del fields["signature"]
        return _SIGNING_CONTEXT + canonical_json(fields)


def check_inv3(pending: PendingDecision) -> None:
    """Refuse to decide on a proposal with a blocker or an error: nothing overrides those."""
    blocking = pending.blocking_validators()
    if blocking or pending.policy.get("blocker_count"):
        named = ", ".join(blocking) or "the policy counted a blocker"
        raise DecisionError(
            f"decision {pending.decision_id} cannot be authorised: it contains a blocker or "
            f"validator error ({named}); no human decision overrides a blocker",
            hint="fix the work and validate again; if it cannot pass, revise the spec (docs/protocol.md, outcomes)",
        )


def draft_decision(
    pending: PendingDecision, *, decision: Decision, justification: str, decided_by: str
) -> DecisionRecord:
    """The unsigned record of a human's verdict on ``pending``; the warns are what it judges."""
    check_inv3(pending)
    if decision not in ("approve", "reject"):
        raise DecisionError(f"a decision is 'approve' or 'reject', not {decision!r}")
    return DecisionRecord(
        decision_id=pending.decision_id,
        task_id=pending.task_id,
        spec_sha256=pending.spec_sha256,
        mode=pending.mode,
        decision=decision,
        adjudicated_validators=pending.warned_validators(),
        justification=justification,
        decided_by=decided_by,
        decided_at=datetime.now(UTC).isoformat(timespec="microseconds"),
    )


Rejected = tuple[Path, str]


@frozen(kw_only=True)
class Judgement:
    """Verified decisions for one task and spec; ``ignored`` records failed verification."""

    adjudicated: frozenset[str]
    rejections: tuple[DecisionRecord, ...]
    ignored: tuple[Rejected, ...]


class DecisionStore:
    """The project's decision records, verified against the user's decision public key."""

    def __init__(self, project: Path, home: Path) -> None:
        self.directory = Path(project) / ".snodo" / "decisions"
        self.project = Path(project)
        self.home = home

    def path(self, decision_id: str) -> Path:
        if not _DECISION_ID.match(decision_id):
            raise DecisionError(f"{decision_id!r} is not a valid decision id")
        return self.directory / f"{decision_id}.json"

    def save(self, record: DecisionRecord) -> Path:
        """Store a signed record; a decision is recorded once and never overwritten."""
        if not record.signature:
            raise DecisionError(f"decision {record.decision_id} is not signed")
        path = self.path(record.decision_id)
        project_state_dir(self.project)
        self.directory.mkdir(exist_ok=True)
        if not atomic_create_bytes(path, dumps_json(unstructure(record)).encode("utf-8"), mode=0o644):
            raise DecisionError(f"decision {record.decision_id} is already recorded at {path}")
        return path

    def verified_records(self, task_id: str, spec_sha256: str) -> tuple[list[DecisionRecord], list[Rejected]]:
        """Records that verify and bind to exactly this task and spec, plus the rejected ones.

        Records of other tasks are skipped silently; any record that is unreadable, badly
        signed, or for this task but another spec is rejected with a reason.
        """
        if not self.directory.is_dir():
            return [], []
        try:
            key: Ed25519PublicKey | None = load_decision_public_key(self.home)
            no_key = ""
        except StateError as exc:
            key, no_key = None, exc.message
        accepted: list[DecisionRecord] = []
        rejected: list[Rejected] = []
        for path in sorted(self.directory.glob("*.json")):
            reason, record = _verify_file(path, key, no_key)
            if record is None or record.task_id != task_id:
                if reason:
                    rejected.append((path, reason))
            elif record.spec_sha256 != spec_sha256:
                rejected.append((path, "bound to another spec of this task (the spec changed since)"))
            else:
                accepted.append(record)
        return accepted, rejected

    def judgement(self, task_id: str, spec_sha256: str) -> Judgement:
        """What verified human decisions say about exactly this task and spec.

        A rejection is final for that task and spec (revise the spec to go on), whatever was
        approved before or after it; approvals adjudicate the warns they name. Fails closed:
        a validator named by any rejection is never counted as adjudicated.
        """
        records, ignored = self.verified_records(task_id, spec_sha256)
        rejections = tuple(r for r in records if r.decision == "reject")
        refused = {v for r in rejections for v in r.adjudicated_validators}
        approved = {v for r in records if r.decision == "approve" for v in r.adjudicated_validators}
        return Judgement(adjudicated=frozenset(approved - refused), rejections=rejections, ignored=tuple(ignored))


def _verify_file(path: Path, key: Ed25519PublicKey | None, no_key: str) -> tuple[str, DecisionRecord | None]:
    """``("", record)`` if the file holds a correctly signed record, else ``(reason, ...)``."""
    try:
        record = load_record(path, DecisionRecord)
    except (StateError, OSError) as exc:
        return f"unreadable: {exc}", None
    if path.stem != record.decision_id:
        return f"file name does not match its decision_id {record.decision_id!r}", None
    if key is None:
        return f"cannot verify: {no_key}", None
    if record.public_key_fingerprint != public_key_fingerprint(key):
        return f"signed by another key ({record.public_key_fingerprint or 'no fingerprint'})", None
    try:
        key.verify(base64.b64decode(record.signature, validate=True), record.signing_bytes())
    except (InvalidSignature, binascii.Error, ValueError):
        return "signature does not verify (the record was altered or forged)", None
    return "", record
