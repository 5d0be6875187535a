"""validate_task, dispatch_task, propose_adjudicate and the path guard, through a real client.

One project, one ``producer`` server for the module: the four outcomes of validate_task
(ADR 015) with their evidence on disk and in the audit log, a dispatch that runs the real
engine in a background job (mock coder, real validators), token bookkeeping that never
uses a token minted for another task or spec, and `.snodo/` protected however it is spelt.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from mcp_harness import Served, audit, git, make_project, serve, snodo

from snodo.rules.outcomes import AGENT_INSTRUCTION
from snodo.rules.taskids import spec_sha256
from snodo.state.sessions import PendingDecision, SessionStore

PROTOCOL = """\
protocol_id: mcp-governance
name: MCP governance test
version: "1.0.0"
disagreement_policy: unanimous
initial_mode: producer
modes:
  - mode_id: producer
    name: Producer
    description: Implements tasks
    tools: [read, edit, validate, dispatch, commit, decide]
    validators: [criteria, suite]
    coder: mock
  - mode_id: strict
    tools: [read, validate]
    validators: [pre_suite]
    coder: mock
  - mode_id: broken
    tools: [read, validate]
    validators: [missing_tool]
    coder: mock
validators:
  - validator_id: criteria
    validator_type: acceptance
    evaluation_phase: pre_execute
    severity_cap: warn
  - validator_id: suite
    validator_type: pytest
    evaluation_phase: post_execute
    tooling: {command: "python -m pytest -q", timeout: 120}
  - validator_id: pre_suite
    validator_type: pytest
    evaluation_phase: pre_execute
    tooling: {command: "python -m pytest -q tests", timeout: 120}
  - validator_id: missing_tool
    validator_type: command
    evaluation_phase: pre_execute
    tooling: {command: "snodo-test-no-such-program-4711 -q", timeout: 60}
"""

PLAIN = "Add a greeting module named `greeting.py` with a function `greeting()`.\n"
PROSE = "Add a salutation module.\n\nAcceptance criteria:\n- the greeting sounds friendly\n"
PROTOCOL_FILE = ".snodo/protocol.yml"


@pytest.fixture(scope="module")
def project(module_dir: Path, module_home: Path) -> Path:
    root = make_project(module_dir / "repo", PROTOCOL)
    # A failing test the `strict` mode's pre-execute suite must block on; untracked, so the
    # background jobs' working copies (made from HEAD) never see it.
    (root / "tests").mkdir()
    (root / "tests" / "test_broken.py").write_text("def test_broken():\n    assert 1 == 2\n")
    (root / "governance").symlink_to(".snodo")
    return root


@pytest.fixture(scope="module")
def producer(project: Path, module_home: Path) -> Iterator[Served]:
    with serve(project, module_home, "--mode", "producer") as s:
        yield s
    assert "Traceback" not in s.stderr()


def _events(root: Path, event: str, **match: Any) -> list[dict[str, Any]]:
    return [r for r in audit(root, event) if all(r["data"].get(k) == v for k, v in match.items())]


def _wait_for_job(s: Served, job_id: str, timeout: float = 90) -> dict[str, Any]:
    deadline = time.monotonic() + timeout
    while True:
        status = s.ok("get_job_status", {"job_id": job_id})
        assert status["status"] in ("queued", "running", "completed", "halted"), status
        if status["status"] in ("completed", "halted"):
            return status
        assert time.monotonic() < deadline, f"job {job_id} still {status['status']}"
        time.sleep(0.3)


# ------------------------------------------------------------------ four outcomes


def test_pass_records_a_token_it_never_returns(producer: Served, project: Path) -> None:
    payload = producer.ok("validate_task", {"task_id": "t-pass", "task_spec": PLAIN})
    assert payload["status"] == "pass"
    assert payload["task_id"] == "t-pass"
    assert payload["token_issued"] is True
    assert "dispatch_task" in payload["instruction"]
    assert "decision_id" not in payload
    assert {"results", "policy", "instruction"} <= set(payload)
    assert [r["validator_id"] for r in payload["results"]] == ["criteria"]
    assert payload["policy"]["name"] == "unanimous"
    assert "eyJ" not in str(payload)  # no JWT anywhere in the reply
    issued = _events(project, "token_issued", task_id="t-pass")
    assert len(issued) == 1 and issued[0]["data"]["spec_sha256"] == spec_sha256(PLAIN)
    assert _events(project, "validate", task_id="t-pass")  # never a validation without a record
    assert issued[0]["mode"] == "producer"


def test_validate_again_without_a_spec_needs_an_earlier_one(producer: Served) -> None:
    text = producer.refused("validate_task", {"task_id": "t-never-seen"})
    assert "task_spec is required" in text and "t-never-seen" in text


def test_escalate_persists_the_decision_then_authorize_then_pass(
    producer: Served, project: Path, module_home: Path
) -> None:
    payload = producer.ok("validate_task", {"task_id": "t-esc", "task_spec": PROSE})
    assert payload["status"] == "escalate"
    assert payload["task_id"] == "t-esc"
    assert payload["token_issued"] is False
    decision_id = payload["decision_id"]
    assert f"snodo authorize {decision_id}" in payload["instruction"]
    assert "eyJ" not in str(payload)
    # The pending decision was on disk before the reply: find it with the stores.
    _, pending = SessionStore(module_home).find_pending(decision_id, project)
    assert pending.task_id == "t-esc" and pending.spec_sha256 == spec_sha256(PROSE)
    assert pending.warned_validators() == ("criteria",)
    assert not _events(project, "token_issued", task_id="t-esc")
    assert _events(project, "escalated", task_id="t-esc", decision_id=decision_id)

    # A proposal authorises nothing: still pending, still escalating.
    proposed = producer.ok(
        "propose_adjudicate",
        {"decision_id": decision_id, "decision": "approve", "justification": "it reads friendly to me"},
    )
    assert proposed["status"] == "proposed"
    proposal = project / proposed["proposal"]
    assert proposal.name == f"{decision_id}-1.json" and proposal.parent == project / ".git" / "snodo" / "proposals"
    assert '"authorises": false' in proposal.read_text()
    again = producer.ok(
        "propose_adjudicate", {"decision_id": decision_id, "decision": "reject", "justification": "second thoughts"}
    )
    assert again["proposal"].endswith(f"{decision_id}-2.json")
    assert len(_events(project, "adjudication_proposed", decision_id=decision_id)) == 2
    SessionStore(module_home).find_pending(decision_id, project)  # still pending
    revalidated = producer.ok("validate_task", {"task_id": "t-esc"})
    assert revalidated["status"] == "escalate"
    assert revalidated["decision_id"] == decision_id  # the same question keeps its one pending decision

    # The out-of-band human route; then the same task and spec pass.
    waiting = [p.decision_id for _, p in SessionStore(module_home).pending(project) if p.task_id == "t-esc"]
    assert waiting == [decision_id]
    listing = snodo(project, module_home, "authorize", "--json", check=True)
    row = next(r for r in json.loads(listing.stdout)["pending"] if r["decision_id"] == decision_id)
    assert [p["decision"] for p in row["agent_proposals"]] == ["approve", "reject"]  # shown as advice
    for did in waiting:
        done = snodo(project, module_home, "authorize", did, "--yes", "-m", "friendly enough")
        assert done.returncode == 0, done
    payload = producer.ok("validate_task", {"task_id": "t-esc"})  # the spec of the earlier call
    assert payload["status"] == "pass", payload
    assert payload["token_issued"] is True
    assert _events(project, "token_issued", task_id="t-esc")


def test_propose_adjudicate_refuses_unknown_decisions(producer: Served) -> None:
    text = producer.refused(
        "propose_adjudicate", {"decision_id": "dec-nope", "decision": "approve", "justification": "x"}
    )
    assert "dec-nope" in text
    assert "'approve' or 'reject'" in producer.refused(
        "propose_adjudicate", {"decision_id": "dec-nope", "decision": "authorize", "justification": "x"}
    )


@pytest.mark.parametrize("decision", ["approve", "reject"])
def test_propose_adjudicate_applies_the_one_inv3_rule(
    producer: Served, project: Path, module_home: Path, decision: str
) -> None:
    """A pending decision whose policy counted a blocker (no result names it) is refused at the
    MCP door exactly as `snodo authorize` refuses it: the door asks the one rule, no copy."""
    store = SessionStore(module_home)
    session = store.create(project, "producer")
    pending = PendingDecision(
        decision_id=f"dec-inv3-{decision}",
        task_id="t-inv3",
        spec_sha256=spec_sha256(PLAIN),
        mode="producer",
        phase="pre_execute",
        results=({"validator_id": "criteria", "severity": "warn", "justification": "vague"},),
        policy={"name": "unanimous", "pass_count": 0, "warn_count": 1, "blocker_count": 1, "total": 1},
        created_at="2025-01-01T00:00:00+00:00",
        spec_text=PLAIN,
    )
    store.add_pending(session.session_id, pending)
    text = producer.refused(
        "propose_adjudicate", {"decision_id": pending.decision_id, "decision": decision, "justification": "x"}
    )
    assert "cannot be authorised" in text and "the policy counted 1 blocker(s)" in text
    assert not _events(project, "adjudication_proposed", decision_id=pending.decision_id)
    listing = snodo(project, module_home, "authorize", "--json", check=True)
    row = next(r for r in json.loads(listing.stdout)["pending"] if r["decision_id"] == pending.decision_id)
    assert row["authorizable"] is False
    store.remove_pending(session.session_id, pending.decision_id)


def test_blocker_issues_nothing(project: Path, module_home: Path) -> None:
    with serve(project, module_home, "--mode", "strict") as s:
        payload = s.ok("validate_task", {"task_id": "t-block", "task_spec": PLAIN})
        assert "dispatch_task" not in s.instructions
    assert payload["status"] == "blocker", payload
    assert payload["task_id"] == "t-block"
    assert payload["token_issued"] is False and "decision_id" not in payload
    assert payload["results"][0]["severity"] == "blocker"
    assert "authorize" not in payload["instruction"]
    assert payload["instruction"] == AGENT_INSTRUCTION["blocker"]  # the words of the one home (outcomes.py)
    assert not _events(project, "token_issued", task_id="t-block")
    assert not _events(project, "escalated", task_id="t-block")
    assert all(p.task_id != "t-block" for _, p in SessionStore(module_home).pending(project))


def test_validator_error_issues_nothing_and_never_says_authorize(project: Path, module_home: Path) -> None:
    with serve(project, module_home, "--mode", "broken") as s:
        payload = s.ok("validate_task", {"task_id": "t-err", "task_spec": PLAIN})
    assert payload["status"] == "validator_error", payload
    assert payload["token_issued"] is False and "decision_id" not in payload
    assert payload["results"][0]["error"]
    assert "authorize" not in payload["instruction"].lower()
    assert not _events(project, "token_issued", task_id="t-err")


# ------------------------------------------------------------------------ dispatch


def test_dispatch_after_pass_runs_the_engine_and_consumes_both_tokens(producer: Served, project: Path) -> None:
    spec = "Add a module named `hello.py` with a function `hello()`.\n"
    assert producer.ok("validate_task", {"task_id": "t-run", "task_spec": spec})["status"] == "pass"
    head = git(project, "rev-parse", "HEAD").strip()
    accepted = producer.ok("dispatch_task", {"task_spec": spec, "task_id": "t-run"})
    assert accepted["status"] == "accepted" and accepted["task_id"] == "t-run"
    assert accepted["token_consumed"] is True
    job_id = accepted["job_id"]
    assert any(j["job_id"] == job_id for j in producer.ok("list_jobs")["jobs"])

    final = _wait_for_job(producer, job_id)
    assert final["status"] == "completed", final
    assert final["task_id"] == "t-run" and "outcome" not in final
    # Committed on the job's task branch; the user's checkout did not move.
    branch, commit = final["branch"], final["commit"]
    assert branch.startswith("snodo/t-run")
    assert git(project, "rev-parse", branch).strip() == commit
    committed = git(project, "show", "--name-only", "--format=", commit).split()
    assert "hello.py" in committed and "tests/test_hello.py" in committed
    assert git(project, "rev-parse", "HEAD").strip() == head
    assert not (project / "hello.py").exists()

    requests = _events(project, "dispatch_request", task_id="t-run")
    assert [r["data"]["job_id"] for r in requests] == [job_id]
    consumed = _events(project, "token_consumed", task_id="t-run")
    consumers = sorted(r["data"]["consumer"] for r in consumed)
    assert len(consumed) == 2, consumers
    assert consumers[0].startswith("engine:")
    assert consumers[1] == f"mcp-dispatch:{job_id}"
    assert len({r["data"]["jti"] for r in consumed}) == 2  # two different tokens


def test_dispatch_never_consumes_a_token_of_another_task_or_spec(producer: Served, project: Path) -> None:
    spec = "Add a module named `alpha.py` with a function `alpha()`.\n"
    assert producer.ok("validate_task", {"task_id": "t-alpha", "task_spec": spec})["status"] == "pass"
    other_spec = PROSE.replace("salutation", "farewell")  # halts at the job's own escalation, cheaply
    jobs = []
    for task_spec, task_id in ((other_spec, "t-alpha"), (spec, "t-beta")):
        reply = producer.ok("dispatch_task", {"task_spec": task_spec, "task_id": task_id})
        assert reply["status"] == "accepted" and reply["token_consumed"] is False
        jobs.append(reply["job_id"])
    for job_id in jobs:
        assert not [r for r in audit(project, "token_consumed") if r["data"]["consumer"] == f"mcp-dispatch:{job_id}"]
    # The token minted for t-alpha and its spec is still there for the dispatch it belongs to.
    reply = producer.ok("dispatch_task", {"task_spec": spec, "task_id": "t-alpha"})
    assert reply["token_consumed"] is True
    assert len(_events(project, "token_consumed", consumer=f"mcp-dispatch:{reply['job_id']}")) == 1
    for job_id in (*jobs, reply["job_id"]):
        _wait_for_job(producer, job_id)


def test_dispatch_without_validation_is_accepted_and_consumes_nothing(producer: Served, project: Path) -> None:
    reply = producer.ok("dispatch_task", {"task_spec": PROSE.replace("salutation", "valediction")})
    assert reply["status"] == "accepted" and reply["task_id"].startswith("task-")
    assert reply["token_consumed"] is False
    final = _wait_for_job(producer, reply["job_id"])
    assert final["status"] == "halted" and final["outcome"] == "escalate", final


def test_job_status_of_an_unknown_job_is_a_tool_error(producer: Served) -> None:
    assert "job-nope" in producer.refused("get_job_status", {"job_id": "job-nope"})


def test_bad_task_ids_are_refused(producer: Served) -> None:
    assert "task_id" in producer.refused("validate_task", {"task_id": "../x", "task_spec": PLAIN})
    assert "task_id" in producer.refused("dispatch_task", {"task_id": "-rf", "task_spec": PLAIN})


# ---------------------------------------------------------------------- path guard


def _variants(root: Path) -> list[str]:
    return [
        PROTOCOL_FILE,
        "./.snodo/protocol.yml",
        "x/../.snodo/p",
        ".SNODO/p",
        str(root / PROTOCOL_FILE),
        "governance/protocol.yml",  # a symlink to .snodo made by the fixture
    ]


@pytest.mark.parametrize("tool", ["write_file", "delete_file", "create_directory", "stage_files"])
def test_snodo_is_protected_however_it_is_spelt(producer: Served, project: Path, tool: str) -> None:
    before = (project / PROTOCOL_FILE).read_bytes()
    for path in _variants(project):
        args: dict[str, Any] = {"paths": [path]} if tool == "stage_files" else {"path": path}
        if tool == "write_file":
            args["content"] = "protocol_id: hijacked\n"
        text = producer.refused(tool, args)
        assert repr(path) in text, text
        assert "`.snodo/` is protected" in text, text
        assert (project / PROTOCOL_FILE).read_bytes() == before
        assert not (project / ".SNODO").exists() and not (project / "x").exists()
        assert not (project / ".snodo" / "p").exists()
        refused = _events(project, "path_refused", tool=tool, path=path)
        assert refused and refused[-1]["mode"] == "producer"
    assert ".snodo" not in git(project, "diff", "--cached", "--name-only")


def test_reading_governance_state_is_allowed(producer: Served, project: Path) -> None:
    assert producer.ok("read_file", {"path": PROTOCOL_FILE})["content"] == (project / PROTOCOL_FILE).read_text()
    assert PROTOCOL_FILE in producer.ok("list_files", {"path": ".snodo"})["files"]


def test_ordinary_files_are_written_staged_and_committed(producer: Served, project: Path) -> None:
    assert producer.ok("write_file", {"path": "docs/notes.md", "content": "notes\n"})["created"] is True
    assert producer.ok("create_directory", {"path": "docs/more"})["created"] is True
    assert producer.ok("stage_files", {"paths": ["docs/notes.md"]})["staged"] == ["docs/notes.md"]
    sha = producer.ok("commit", {"message": "docs: notes"})["commit"]
    assert git(project, "rev-parse", "HEAD").strip() == sha
    assert producer.ok("delete_file", {"path": "docs/notes.md"})["deleted"] is True
    assert not (project / "docs" / "notes.md").exists()
