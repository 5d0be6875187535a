"""Agents' proposals on pending decisions (runtime ``proposals/<decision_id>-<n>.json``): advice
shown by ``snodo authorize`` beside the escalation, all but the bookkeeping from an agent."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path
from typing import Literal

from attrs import frozen

from snodo.base.errors import DecisionError, StateError
from snodo.state.atomic import atomic_create_bytes, dumps_json, load_record, unstructure
from snodo.state.decisions import DECISION_ID, Rejected
from snodo.state.home import made
from snodo.state.runtime import runtime_dir
from snodo.state.sessions import PendingDecision

MAX_PROPOSALS_PER_DECISION = 1000
Unreadable = Rejected  # a file for_decision cannot use: reported, never skipped


@frozen(kw_only=True)
class Proposal:
    decision_id: str
    decision: Literal["approve", "reject"]
    justification: str
    proposed_by: str
    proposed_at: str
    task_id: str
    spec_sha256: str
    session_id: str
    warned_validators: tuple[str, ...]
    n: int
    authorises: bool = False
    note: str = ""


class ProposalStore:
    def __init__(self, project: Path) -> None:
        self.directory = runtime_dir(Path(project)) / "proposals"

    def add(
        self,
        pending: PendingDecision,
        *,
        session_id: str,
        decision: Literal["approve", "reject"],
        justification: str,
        proposed_by: str,
    ) -> tuple[Path, Proposal]:
        """Stored with the first free ``n``; never overwrites."""
        if not DECISION_ID.match(pending.decision_id):
            raise DecisionError(f"{pending.decision_id!r} is not a valid decision id")
        made(self.directory, 0o777)
        for n in range(1, MAX_PROPOSALS_PER_DECISION + 1):
            proposal = Proposal(
                decision_id=pending.decision_id,
                decision=decision,
                justification=justification,
                proposed_by=proposed_by,
                proposed_at=datetime.now(UTC).isoformat(timespec="seconds"),
                task_id=pending.task_id,
                spec_sha256=pending.spec_sha256,
                session_id=session_id,
                warned_validators=pending.warned_validators(),
                n=n,
                note=f"a proposal only; a person decides with `snodo authorize {pending.decision_id}`",
            )
            path = self.directory / f"{pending.decision_id}-{n}.json"
            if atomic_create_bytes(path, dumps_json(unstructure(proposal)).encode("utf-8"), mode=0o644):
                return path, proposal
        raise DecisionError(
            f"decision {pending.decision_id} already has {MAX_PROPOSALS_PER_DECISION} proposals; no more are kept"
        )

    def _files(self, decision_id: str) -> list[tuple[int, Path]]:
        """``(n, path)`` of each proposal of ``decision_id``, in the order they were made."""
        if not DECISION_ID.match(decision_id) or not self.directory.is_dir():
            return []
        found = ((path.stem[len(decision_id) + 1 :], path) for path in self.directory.glob(f"{decision_id}-*.json"))
        return sorted((int(n), path) for n, path in found if n.isdigit())

    def for_decision(self, decision_id: str) -> list[Proposal | Unreadable]:
        found: list[Proposal | Unreadable] = []
        for n, path in self._files(decision_id):
            try:
                proposal = load_record(path, Proposal)
            except (StateError, OSError) as exc:
                found.append(Unreadable(path=path, reason=str(exc)))
                continue
            if proposal.decision_id != decision_id or proposal.n != n:
                found.append(Unreadable(path=path, reason="its content does not match its file name"))
            else:
                found.append(proposal)
        return found

    def remove(self, decision_id: str) -> int:
        """How many proposals were removed."""
        files = self._files(decision_id)
        for _, path in files:
            path.unlink(missing_ok=True)
        return len(files)
