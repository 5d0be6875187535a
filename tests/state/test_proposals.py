from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import pytest

from snodo.base.errors import DecisionError
from snodo.state.proposals import Proposal, ProposalStore, Unreadable
from snodo.state.sessions import PendingDecision


def test_proposals_are_numbered_never_overwritten_and_read_in_order(
    project: Path, make_pending: Callable[..., PendingDecision]
) -> None:
    store = ProposalStore(project)
    pending = make_pending("dec-1")
    paths = [
        store.add(pending, session_id="s1", decision=d, justification=f"because {i}", proposed_by="mcp:dev")[0]
        for i, d in enumerate(("approve", "reject", "approve"))
    ]
    assert [p.name for p in paths] == ["dec-1-1.json", "dec-1-2.json", "dec-1-3.json"]
    found = store.for_decision("dec-1")
    assert all(isinstance(p, Proposal) for p in found)
    assert [(p.n, p.decision, p.justification) for p in found if isinstance(p, Proposal)] == [
        (1, "approve", "because 0"),
        (2, "reject", "because 1"),
        (3, "approve", "because 2"),
    ]
    first = json.loads(paths[0].read_text())
    assert first["authorises"] is False and first["warned_validators"] == ["review"]
    assert store.for_decision("dec-2") == []


def test_an_unreadable_or_misfiled_proposal_is_reported(
    project: Path, make_pending: Callable[..., PendingDecision]
) -> None:
    store = ProposalStore(project)
    path, _ = store.add(make_pending("dec-1"), session_id="s", decision="approve", justification="j", proposed_by="x")
    path.with_name("dec-1-2.json").write_text("{")
    path.with_name("dec-1-3.json").write_text(path.read_text())  # says n=1
    found = store.for_decision("dec-1")
    assert isinstance(found[0], Proposal)
    assert isinstance(found[1], Unreadable) and "dec-1-2.json" in found[1].reason
    assert isinstance(found[2], Unreadable) and "does not match its file name" in found[2].reason
    assert store.remove("dec-1") == 3 and store.for_decision("dec-1") == []


def test_decision_ids_are_checked(project: Path, make_pending: Callable[..., PendingDecision]) -> None:
    with pytest.raises(DecisionError):
        ProposalStore(project).add(
            make_pending("../x"), session_id="s", decision="approve", justification="j", proposed_by="x"
        )
    assert ProposalStore(project).for_decision("../x") == []
