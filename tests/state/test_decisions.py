from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from attrs import evolve

from snodo.base.errors import DecisionError, StateError
from snodo.cli.signing import load_decision_private_key, sign_decision
from snodo.state.decisions import Decision, DecisionRecord, DecisionStore, draft_decision
from snodo.state.keys import DECISION_PRIVATE_KEY_FILE
from snodo.state.sessions import PendingDecision

MakePending = Callable[..., PendingDecision]
SPEC = "a" * 64


@pytest.fixture
def store(project: Path, home: Path) -> DecisionStore:
    return DecisionStore(project, home)


def authorise(home: Path, pending: PendingDecision, decision: Decision = "approve") -> DecisionRecord:
    draft = draft_decision(pending, decision=decision, justification="reviewed by hand", decided_by="ada")
    return sign_decision(home, draft, pending)


def test_sign_save_verify_round_trip(home: Path, store: DecisionStore, make_pending: MakePending) -> None:
    pending = make_pending(severities={"lint": "pass", "review": "warn", "docs": "warn"})
    record = authorise(home, pending)
    assert record.adjudicated_validators == ("review", "docs")
    assert record.public_key_fingerprint.startswith("sha256:") and record.signature
    path = store.save(record)
    assert path == store.directory / "dec-1.json"
    assert store.verified_records("task-1", SPEC) == ([record], [])
    assert store.judgement("task-1", SPEC).adjudicated == frozenset({"review", "docs"})


def test_record_applies_to_exactly_its_task_and_spec(
    home: Path, store: DecisionStore, make_pending: MakePending
) -> None:
    store.save(authorise(home, make_pending()))
    assert store.judgement("task-2", SPEC).adjudicated == frozenset()
    assert store.verified_records("task-2", SPEC) == ([], [])
    assert store.judgement("task-1", "c" * 64).adjudicated == frozenset()
    records, rejected = store.verified_records("task-1", "c" * 64)
    assert records == [] and rejected[0][0].name == "dec-1.json" and "another spec" in rejected[0][1]


@pytest.mark.parametrize(
    "tamper",
    [
        lambda r: r | {"justification": "changed"},
        lambda r: r | {"decision": "approve", "adjudicated_validators": ["review", "lint"]},
        lambda r: r | {"spec_sha256": "c" * 64},
        lambda r: r | {"signature": "!!not base64!!"},
    ],
)
def test_tampered_record_is_ignored_and_reported(
    home: Path,
    store: DecisionStore,
    make_pending: MakePending,
    tamper: Callable[[dict[str, Any]], dict[str, Any]],
) -> None:
    path = store.save(authorise(home, make_pending()))
    path.write_text(json.dumps(tamper(json.loads(path.read_text()))))
    records, rejected = store.verified_records("task-1", SPEC)
    assert records == []
    assert [(r.path, r.reason) for r in rejected] == [
        (path, "signature does not verify (the record was altered or forged)")
    ]
    assert store.judgement("task-1", SPEC).adjudicated == frozenset()


def test_unreadable_and_misfiled_records_are_reported(
    home: Path, store: DecisionStore, make_pending: MakePending
) -> None:
    path = store.save(authorise(home, make_pending()))
    (store.directory / "dec-9.json").write_text(path.read_text())
    (store.directory / "junk.json").write_text("{")
    records, rejected = store.verified_records("task-1", SPEC)
    assert len(records) == 1
    reasons = {r.path.name: r.reason for r in rejected}
    assert "does not match its decision_id" in reasons["dec-9.json"]
    assert reasons["junk.json"].startswith("unreadable") and "junk.json" in reasons["junk.json"]


def test_record_signed_by_another_key_is_rejected(
    home: Path, tmp_path: Path, project: Path, make_pending: MakePending
) -> None:
    foreign = authorise(tmp_path / "other-home", make_pending())
    store = DecisionStore(project, home)
    store.save(foreign)
    _, rejected = store.verified_records("task-1", SPEC)
    assert "cannot verify: no decision public key" in rejected[0][1]
    authorise(home, make_pending("dec-2"))  # creates this user's pair
    _, rejected = store.verified_records("task-1", SPEC)
    assert "which is not this home's decision key" in rejected[0][1]
    assert rejected[0].signer == "ada" and rejected[0].key == foreign.public_key_fingerprint


def test_a_rejection_is_final_for_its_task_and_spec(
    home: Path, store: DecisionStore, make_pending: MakePending
) -> None:
    store.save(authorise(home, make_pending("dec-1")))
    assert store.judgement("task-1", SPEC).adjudicated == frozenset({"review"})
    store.save(authorise(home, make_pending("dec-2"), decision="reject"))
    store.save(authorise(home, make_pending("dec-3")))  # a later approval does not undo it
    judged = store.judgement("task-1", SPEC)
    assert judged.adjudicated == frozenset()
    assert [r.decision_id for r in judged.rejections] == ["dec-2"]


def test_a_decision_is_recorded_once(home: Path, store: DecisionStore, make_pending: MakePending) -> None:
    record = authorise(home, make_pending())
    store.save(record)
    with pytest.raises(DecisionError, match="already recorded"):
        store.save(record)
    with pytest.raises(DecisionError, match="not signed"):
        store.save(evolve(record, signature=""))


# ------------------------------------------------------------------ INV3


@pytest.mark.parametrize("severity", ["blocker", "error"])
def test_blocker_or_error_cannot_be_authorised(home: Path, make_pending: MakePending, severity: str) -> None:
    pending = make_pending(severities={"review": "warn", "tests": severity}, error="crashed")
    decisions: tuple[Decision, ...] = ("approve", "reject")
    for decision in decisions:
        with pytest.raises(DecisionError, match="cannot be authorised") as caught:
            draft_decision(pending, decision=decision, justification="", decided_by="ada")
        assert "tests" in str(caught.value)


def test_signing_rechecks_inv3_and_binding(home: Path, make_pending: MakePending) -> None:
    clean = make_pending()
    draft = draft_decision(clean, decision="approve", justification="ok", decided_by="ada")
    blocked = make_pending(severities={"review": "warn", "tests": "blocker"})
    with pytest.raises(DecisionError, match="cannot be authorised"):
        sign_decision(home, draft, blocked)
    with pytest.raises(DecisionError, match="does not match"):
        sign_decision(home, draft, make_pending(spec_sha256="c" * 64))
    with pytest.raises(DecisionError, match="did not warn"):
        sign_decision(home, evolve(draft, adjudicated_validators=("review", "lint")), clean)
    assert not (home / "keys" / DECISION_PRIVATE_KEY_FILE).exists()


def test_private_key_readable_by_others_is_refused(home: Path, make_pending: MakePending) -> None:
    authorise(home, make_pending())
    (home / "keys" / DECISION_PRIVATE_KEY_FILE).chmod(0o640)
    with pytest.raises(StateError, match="mode 0640"):
        load_decision_private_key(home)
