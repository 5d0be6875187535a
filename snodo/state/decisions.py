"""Signed human decisions, ``<project>/.snodo/decisions/<decision_id>.json`` (committed). One
lets a ``warn`` pass only while its signature (by :mod:`snodo.cli.signing`) verifies with a
trusted key and it binds exactly the task, spec and (after execution) git tree validated
(docs/architecture.md, "Decisions"); those that fail are handed back, with their signer."""

from __future__ import annotations

import base64
import binascii
import re
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Literal, NamedTuple

from attrs import frozen
from cryptography.exceptions import InvalidSignature

from snodo.base.errors import DecisionError, StateError
from snodo.state.atomic import atomic_create_bytes, canonical_json, dumps_json, load_record, unstructure
from snodo.state.home import made
from snodo.state.keys import load_decision_public_key, public_key_fingerprint
from snodo.state.sessions import PendingDecision
from snodo.state.signers import ALLOWED_SIGNERS, DECISION_NAMESPACE, Signer, parse_allowed_signers, signers_for

Decision = Literal["approve", "reject"]
DECISION_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,127}$")
# Prefixed to the signed bytes: a decision's signature never passes for another document's.
_SIGNING_CONTEXT = b"snodo decision record v1\n"
_LISTED_FILE = f".snodo/{ALLOWED_SIGNERS}"
_LISTED = f"the {_LISTED_FILE} in force"
#: The keys whose decisions count, by fingerprint, and why a record's signer is not one of them.
Trust = tuple[dict[str, Signer], Callable[[str], str]]


@frozen(kw_only=True)
class DecisionRecord:
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
    tree: str = ""  # the git tree judged by a post_execute escalation; "" before execution

    def signing_bytes(self) -> bytes:
        """Every field but the signature (an empty ``tree`` left out: records signed before it
        existed still verify)."""
        fields = unstructure(self)
        del fields["signature"]
        if not fields["tree"]:
            del fields["tree"]
        return _SIGNING_CONTEXT + canonical_json(fields)


def check_inv3(pending: PendingDecision) -> None:
    """Refuse to decide on an escalation with a blocker or an error (``snodo.rules.authorisation``)."""
    refusals = pending.blocking_validators()
    if refusals:
        raise DecisionError(
            f"decision {pending.decision_id} cannot be authorised: it contains a blocker or "
            f"validator error ({', '.join(refusals)}); no human decision overrides a blocker",
            hint="fix the work and validate again; if it cannot pass, revise the spec (docs/protocol.md, outcomes)",
        )


def draft_decision(
    pending: PendingDecision, *, decision: Decision, justification: str, decided_by: str
) -> DecisionRecord:
    check_inv3(pending)
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
        tree=pending.tree,
    )


class Rejected(NamedTuple):
    """A record that does not count, and who signed it when it could be read."""

    path: Path
    reason: str
    signer: str = ""
    key: str = ""


@frozen(kw_only=True)
class Judgement:
    adjudicated: frozenset[str]
    rejections: tuple[DecisionRecord, ...]
    ignored: tuple[Rejected, ...]


class DecisionStore:
    def __init__(self, project: Path, home: Path, *, signers: str | None) -> None:
        """``signers``: the allowed_signers text in force (``None``: no list is in force)."""
        self.directory = Path(project) / ".snodo" / "decisions"
        self.home = home
        self.signers = signers

    def path(self, decision_id: str) -> Path:
        if not DECISION_ID.match(decision_id):
            raise DecisionError(f"{decision_id!r} is not a valid decision id")
        return self.directory / f"{decision_id}.json"

    def save(self, record: DecisionRecord) -> Path:
        """A decision is recorded once and never overwritten."""
        if not record.signature:
            raise DecisionError(f"decision {record.decision_id} is not signed")
        path = self.path(record.decision_id)
        made(self.directory, 0o777)
        if not atomic_create_bytes(path, dumps_json(unstructure(record)).encode("utf-8"), mode=0o644):
            raise DecisionError(f"decision {record.decision_id} is already recorded at {path}")
        return path

    def trust(self) -> Trust:
        if self.signers is not None:
            listed = signers_for(parse_allowed_signers(self.signers, _LISTED), DECISION_NAMESPACE)
            return listed, lambda who: f"{who}, which is not listed in {_LISTED}"
        try:
            key = load_decision_public_key(self.home)
        except StateError as exc:
            problem = exc.message
            return {}, lambda who: f"cannot verify: {problem} ({who})"
        why = f"which is not this home's decision key (list it in {_LISTED_FILE} to trust it)"
        return {public_key_fingerprint(key): Signer(name="local", key=key)}, lambda who: f"{who}, {why}"

    def verified_records(
        self, task_id: str, spec_sha256: str, *, tree: str = ""
    ) -> tuple[list[DecisionRecord], list[Rejected]]:
        """Records that verify and bind exactly this task, spec and tree, and the rejected ones
        with why; other tasks' records are skipped."""
        if not self.directory.is_dir():
            return [], []
        trust = self.trust()
        accepted: list[DecisionRecord] = []
        rejected: list[Rejected] = []
        for path in sorted(self.directory.glob("*.json")):
            record = _verify_file(path, trust)
            if isinstance(record, Rejected):
                rejected.append(record)
            elif record.task_id != task_id:
                continue
            elif record.spec_sha256 != spec_sha256:
                rejected.append(_rejected(path, record, "bound to another spec of this task (the spec changed since)"))
            elif record.tree != tree:
                why = (
                    f"bound to the git tree {record.tree[:12]}, not {tree[:12] or 'a run before execution'}: "
                    "the work changed since it was reviewed"
                    if record.tree
                    else "decided before execution; after execution a decision binds to the reviewed git tree"
                )
                rejected.append(_rejected(path, record, why))
            else:
                accepted.append(record)
        return accepted, rejected

    def judgement(self, task_id: str, spec_sha256: str, *, tree: str = "") -> Judgement:
        """A rejection is final for this task, spec and tree (revise the spec to go on);
        approvals adjudicate the warns they name, but never one a rejection names."""
        records, ignored = self.verified_records(task_id, spec_sha256, tree=tree)
        rejections = tuple(r for r in records if r.decision == "reject")
        refused = {v for r in rejections for v in r.adjudicated_validators}
        approved = {v for r in records if r.decision == "approve" for v in r.adjudicated_validators}
        return Judgement(adjudicated=frozenset(approved - refused), rejections=rejections, ignored=tuple(ignored))

    def decided(self, pending: PendingDecision) -> bool:
        """Whether verified records already settle (or reject) every warn of ``pending``."""
        judged = self.judgement(pending.task_id, pending.spec_sha256, tree=pending.tree)
        return bool(judged.rejections) or set(pending.warned_validators()) <= judged.adjudicated


def _rejected(path: Path, record: DecisionRecord, reason: str) -> Rejected:
    return Rejected(path, reason, record.decided_by, record.public_key_fingerprint)


def _verify_file(path: Path, trust: Trust) -> DecisionRecord | Rejected:
    """The record if the file holds one signed by a trusted key, else why not."""
    try:
        record = load_record(path, DecisionRecord)
    except (StateError, OSError) as exc:
        return Rejected(path, f"unreadable: {exc}")
    if path.stem != record.decision_id:
        return _rejected(path, record, f"file name does not match its decision_id {record.decision_id!r}")
    signers, untrusted = trust
    signer = signers.get(record.public_key_fingerprint)
    if signer is None or signer.key is None:
        who = f"signed by {record.decided_by!r} with key {record.public_key_fingerprint or '(none)'}"
        return _rejected(path, record, untrusted(who))
    try:
        signer.key.verify(base64.b64decode(record.signature, validate=True), record.signing_bytes())
    except (InvalidSignature, binascii.Error, ValueError):
        return _rejected(path, record, "signature does not verify (the record was altered or forged)")
    return record
