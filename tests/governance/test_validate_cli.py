"""`snodo validate` and `snodo authorize` end to end, as real subprocesses on a real repository."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from snodo.rules.outcomes import AGENT_INSTRUCTION
from tests.conftest import judge_prose_only_before

FRIENDLY = """Add a greeting module.

Acceptance criteria:
- the greeting sounds friendly
"""


@pytest.fixture
def project(project: Path) -> Path:
    """The solo project, its prose criterion judged before the work only: an escalation at
    pre_execute, answered by a decision bound to the task and spec."""
    judge_prose_only_before(project)
    return project


def audit_events(repo: Path) -> list[dict]:  # type: ignore[type-arg]
    lines = (repo / ".git" / "snodo" / "audit.log").read_text().splitlines()
    return [e for e in map(json.loads, lines) if e["event"] != "checkpoint"]


def test_pass_records_a_token_and_audits(project: Path, snodo_cli) -> None:  # type: ignore[no-untyped-def]
    r = snodo_cli("validate", "add a hello module", "--json", cwd=project)
    assert r.returncode == 0, r
    payload = r.json()
    assert payload["status"] == "pass" and payload["token_issued"] is True
    assert payload["task_id"].startswith("task-")
    assert "token" not in payload and "dispatch_task" in payload["instruction"]
    assert {res["validator_id"] for res in payload["results"]} == {"scope", "criteria"}
    events = [e["event"] for e in audit_events(project)]
    assert events == ["session_started", "validate", "token_issued"]
    assert snodo_cli("audit", "verify", cwd=project).returncode == 0


def test_escalate_authorize_then_pass_for_exactly_that_task_and_spec(project: Path, snodo_cli) -> None:  # type: ignore[no-untyped-def]
    r = snodo_cli("validate", "-", "--json", cwd=project, input=FRIENDLY)
    assert r.returncode == 2, r
    esc = r.json()
    assert esc["status"] == "escalate" and esc["token_issued"] is False
    decision_id = esc["decision_id"]
    assert f"snodo authorize {decision_id}" in esc["instruction"]
    listing = snodo_cli("authorize", "--json", cwd=project).json()
    assert [p["decision_id"] for p in listing["pending"]] == [decision_id]
    assert listing["pending"][0]["warned_validators"] == ["criteria"]

    signed = snodo_cli("authorize", decision_id, "--yes", cwd=project)
    assert signed.returncode == 0, signed
    assert "the greeting sounds friendly" in signed.stdout  # the stored proposal was rendered
    assert snodo_cli("authorize", "--json", cwd=project).json()["pending"] == []

    again = snodo_cli("validate", "-", "--json", cwd=project, input=FRIENDLY)
    assert again.returncode == 0, again
    assert again.json()["policy"]["adjudicated"] == ["criteria"]

    other_task = snodo_cli("validate", "-", "--json", cwd=project, input=FRIENDLY.replace("greeting", "farewell"))
    assert other_task.returncode == 2
    other_spec = snodo_cli(
        "validate", "-", "--json", "--task-id", esc["task_id"], cwd=project, input=FRIENDLY + "- and it is short\n"
    )
    assert other_spec.returncode == 2

    events = [e["event"] for e in audit_events(project)]
    assert "escalated" in events and "decision_recorded" in events
    assert snodo_cli("audit", "verify", cwd=project).returncode == 0


def test_rejection_blocks_the_task(project: Path, snodo_cli) -> None:  # type: ignore[no-untyped-def]
    decision_id = snodo_cli("validate", "-", "--json", cwd=project, input=FRIENDLY).json()["decision_id"]
    assert snodo_cli("authorize", decision_id, "--yes", "--reject", "-m", "not now", cwd=project).returncode == 0
    r = snodo_cli("validate", "-", "--json", cwd=project, input=FRIENDLY)
    assert r.returncode == 1 and r.json()["status"] == "blocker"
    assert "not now" in json.dumps(r.json()["results"])


def test_unknown_decision_and_tampered_record(project: Path, snodo_cli) -> None:  # type: ignore[no-untyped-def]
    r = snodo_cli("authorize", "dec-nope", "--yes", cwd=project)
    assert r.returncode == 4 and "no pending decision" in r.stderr  # an unknown id: could not run
    decision_id = snodo_cli("validate", "-", "--json", cwd=project, input=FRIENDLY).json()["decision_id"]
    assert snodo_cli("authorize", decision_id, "--yes", cwd=project).returncode == 0
    record = project / ".snodo" / "decisions" / f"{decision_id}.json"
    data = json.loads(record.read_text())
    data["adjudicated_validators"] = ["criteria", "scope"]
    record.write_text(json.dumps(data))
    r = snodo_cli("validate", "-", "--json", cwd=project, input=FRIENDLY)
    assert r.returncode == 2, r  # the forged record is ignored...
    assert "decision_ignored" in [e["event"] for e in audit_events(project)]  # ...and audited


def write_protocol(repo: Path, validator: str) -> None:
    (repo / ".snodo" / "protocol.yml").write_text(
        "protocol_id: t\nname: t\nmodes:\n  - mode_id: producer\n    tools: [read, edit, validate]\n"
        "    validators: [gate]\n    coder: mock\nvalidators:\n" + validator
    )


def test_failing_suite_is_a_blocker_and_missing_command_a_validator_error(project: Path, snodo_cli) -> None:  # type: ignore[no-untyped-def]
    (project / "test_bad.py").write_text("def test_bad():\n    assert 1 == 2\n")
    write_protocol(project, "  - {validator_id: gate, validator_type: pytest}\n")
    r = snodo_cli("validate", "fix the bug", "--json", cwd=project)
    assert r.returncode == 1, r
    assert r.json()["status"] == "blocker" and r.json()["token_issued"] is False
    assert "assert 1 == 2" in json.dumps(r.json()["results"][0])  # the failing test's output tail

    write_protocol(
        project,
        "  - {validator_id: gate, validator_type: pytest, severity_cap: pass,"
        " tooling: {command: no-such-program-xyz}}\n",
    )
    r = snodo_cli("validate", "fix the bug", "--json", cwd=project)
    assert r.returncode == 3, r
    payload = r.json()
    assert payload["status"] == "validator_error" and "authorize" not in payload["instruction"]
    assert payload["instruction"] == AGENT_INSTRUCTION["validator_error"]  # the MCP door's words, from outcomes.py
    assert "no-such-program-xyz" in payload["results"][0]["error"]


def test_could_not_run_is_exit_4(tmp_path: Path, snodo_cli) -> None:  # type: ignore[no-untyped-def]
    r = snodo_cli("validate", "x", cwd=tmp_path)
    assert r.returncode == 4 and "snodo init" in r.stderr


@pytest.mark.parametrize("bad", ["../escape", "-rf", "a b", "x..y", "t.lock", ""])
def test_task_ids_are_plain(project: Path, snodo_cli, bad: str) -> None:  # type: ignore[no-untyped-def]
    for command in (
        ("validate", "add a hello module", "--task-id", bad),
        ("run", "add a hello module", "--mock", "--task-id", bad),
    ):
        r = snodo_cli(*command, cwd=project)
        if bad == "":  # an empty id means "derive it from the spec"
            assert r.returncode == 0, r
            continue
        assert r.returncode != 0 and "is refused" in r.stderr, r
        assert "Traceback" not in r.stderr
