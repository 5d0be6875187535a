"""The plan tools: authoring executes nothing and needs nothing; run_plan dispatches jobs.

Decomposition is deterministic for a mode whose coder is ``mock`` (or that names no
model), and asks the mode's model otherwise — here litellm's offline ``mock_response``.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from mcp_harness import Served, audit, git, make_project, serve

from snodo.base.errors import ToolError
from snodo.engine.plans import Planner, PlanStore
from snodo.plugin.host import get_plugin_manager
from snodo.plugin.planning import deterministic_spec, split_goal
from snodo.protocol.models import Mode
from snodo.rules.taskids import derive_task_id

MODEL_TASKS = json.dumps(
    [
        {"title": "Add the parser", "spec": "Add a parser module.\n\nAcceptance criteria:\n- tests pass\n"},
        {"title": "Add the printer", "spec": "Add a printer module.\n"},
    ]
)

PROTOCOL = f"""\
protocol_id: mcp-plans
name: MCP plans test
version: "1.0.0"
initial_mode: lead
modes:
  - mode_id: lead
    tools: [read, plan, dispatch]   # run_plan runs tasks here: only a dispatching mode may
    validators: [criteria, suite]
    coder: mock
  - mode_id: handoff
    tools: [read, plan]
    validators: [criteria]
    transitions: [{{to: lead, on: run_plan}}]
    coder: mock
  - mode_id: modelled
    tools: [read, plan]
    validators: [criteria]
    coder: litellm
    coder_config: {{model: openai/gpt-4o-mini, mock_response: {json.dumps(MODEL_TASKS)}}}
validators:
  - validator_id: criteria
    validator_type: acceptance
    evaluation_phase: pre_execute
    severity_cap: warn
  - validator_id: suite
    validator_type: pytest
    evaluation_phase: post_execute
    tooling: {{command: "python -m pytest -q", timeout: 120}}
"""

GOAL = (
    "Greetings for the app:\n"
    "- add a module named `hi.py` with a function `hi()`\n"
    "- add a module named `bye.py` with a function `bye()`\n"
)


@pytest.fixture(scope="module")
def project(module_dir: Path) -> Path:
    return make_project(module_dir / "repo", PROTOCOL)


@pytest.fixture(scope="module")
def lead(project: Path, module_home: Path) -> Iterator[Served]:
    with serve(project, module_home, "--mode", "lead") as s:
        yield s
    assert "Traceback" not in s.stderr()


def _worktree_state(root: Path) -> tuple[str, str]:
    return git(root, "rev-parse", "HEAD"), git(root, "status", "--porcelain", "--", ".", ":!.snodo")


def test_propose_plan_stores_tasks_and_executes_nothing(lead: Served, project: Path) -> None:
    before = _worktree_state(project)
    plan = lead.ok("propose_plan", {"goal": GOAL})
    assert plan["status"] == "proposed" and plan["planner"] == "deterministic" and plan["mode"] == "lead"
    titles = [t["title"] for t in plan["tasks"]]
    assert titles == [
        "Add a module named `hi.py` with a function `hi()`",
        "Add a module named `bye.py` with a function `bye()`",
    ]
    for task in plan["tasks"]:
        assert task["task_id"] == derive_task_id(task["spec"]) and task["job_id"] is None
    stored = project / ".git" / "snodo" / "plans" / f"{plan['plan_id']}.json"
    assert json.loads(stored.read_text()) == plan
    assert _worktree_state(project) == before
    assert not (project / ".git" / "snodo" / "jobs").exists()
    assert [r["data"]["plan_id"] for r in audit(project, "plan_proposed")][-1] == plan["plan_id"]
    assert lead.ok("get_plan", {"plan_id": plan["plan_id"]})["tasks"] == plan["tasks"]


def test_decompose_a_spec_or_a_plan_again(lead: Served, project: Path) -> None:
    split = lead.ok("decompose", {"spec": "add a greet function and a farewell function"})
    assert split["stored"] is False
    assert [t["title"] for t in split["tasks"]] == ["Add a greet function", "Add a farewell function"]
    plan = lead.ok("propose_plan", {"goal": "Write the docs. Then add a changelog."})
    assert [t["title"] for t in plan["tasks"]] == ["Write the docs", "Add a changelog"]
    again = lead.ok("decompose", {"plan_id": plan["plan_id"]})
    assert again["stored"] is True and again["revision"] == 2
    assert [t["title"] for t in again["tasks"]] == ["Write the docs", "Add a changelog"]
    assert "exactly one" in lead.refused("decompose", {})
    assert "exactly one" in lead.refused("decompose", {"plan_id": plan["plan_id"], "spec": "x"})


def test_generate_spec_needs_nothing(lead: Served) -> None:
    reply = lead.ok("generate_spec", {"task": "add a module named `x1.py`"})
    assert reply["spec"] == "Add a module named `x1.py`.\n"
    assert reply["task_id"] == derive_task_id(reply["spec"])


def test_unknown_or_malformed_plans_are_tool_errors(lead: Served) -> None:
    assert "plan-000000000000" in lead.refused("get_plan", {"plan_id": "plan-000000000000"})
    assert "not a plan id" in lead.refused("run_plan", {"plan_id": "../../etc/passwd"})
    assert "empty" in lead.refused("propose_plan", {"goal": "   "})


def _wait_for_plan(s: Served, plan_id: str, timeout: float = 90) -> dict[str, Any]:
    deadline = time.monotonic() + timeout
    while True:
        plan = s.ok("get_plan", {"plan_id": plan_id})
        states = [t.get("job", {}).get("status") for t in plan["tasks"]]
        if all(state in ("completed", "halted") for state in states):
            return plan
        assert time.monotonic() < deadline, states
        time.sleep(0.3)


def test_run_plan_dispatches_each_task_once(lead: Served, project: Path) -> None:
    head = git(project, "rev-parse", "HEAD")
    plan = lead.ok("propose_plan", {"goal": GOAL})
    plan_id = plan["plan_id"]
    started = lead.ok("run_plan", {"plan_id": plan_id})
    assert started["status"] == "accepted" and len(started["jobs"]) == 2
    assert [j["task_id"] for j in started["jobs"]] == [t["task_id"] for t in plan["tasks"]]
    requests = {r["data"]["job_id"] for r in audit(project, "dispatch_request")}
    assert {j["job_id"] for j in started["jobs"]} <= requests

    again = lead.ok("run_plan", {"plan_id": plan_id})
    assert again["jobs"] == [] and len(again["already_dispatched"]) == 2
    assert "dispatched" in lead.refused("decompose", {"plan_id": plan_id})

    done = _wait_for_plan(lead, plan_id)
    for task in done["tasks"]:
        assert task["job"]["status"] == "completed", task["job"]
        assert task["job"]["mode"] == "lead"
        assert git(project, "rev-parse", task["job"]["branch"]).strip() == task["job"]["commit"]
    assert git(project, "rev-parse", "HEAD") == head


def test_a_mode_with_a_model_asks_it(project: Path, module_home: Path) -> None:
    with serve(project, module_home, "--mode", "modelled") as s:
        plan = s.ok("propose_plan", {"goal": "a tiny pretty-printer"})
    assert plan["planner"] == "model:openai/gpt-4o-mini"
    assert [t["title"] for t in plan["tasks"]] == ["Add the parser", "Add the printer"]
    assert plan["tasks"][0]["spec"].startswith("Add a parser module.")


# ------------------------------------------------------------ the planner itself


def test_split_goal_rules() -> None:
    assert split_goal("1. write the parser\n2. [ ] write the printer\n") == ["Write the parser", "Write the printer"]
    assert split_goal("Read and write files") == ["Read and write files"]
    assert split_goal("add a cache and then document it") == ["Add a cache", "Document it"]
    assert split_goal("Fix the bug; add a test.") == ["Fix the bug", "Add a test"]
    assert split_goal("- a thing\n- a thing\n") == ["A thing"]
    with pytest.raises(ToolError):
        split_goal(" \n ")
    assert deterministic_spec("  fix   it ") == "Fix it.\n"


def test_planner_choice_follows_the_mode() -> None:
    host = get_plugin_manager()
    assert Planner.for_mode(Mode(mode_id="m", coder="mock", coder_config={"model": "x/y"}), host).model is None
    assert Planner.for_mode(Mode(mode_id="m", coder="litellm"), host).model is None
    assert Planner.for_mode(Mode(mode_id="m", coder="litellm", coder_config={"model": "x/y"}), host).model == "x/y"


def test_plan_store_refuses_bad_ids_and_reports_missing_plans(tmp_path: Path) -> None:
    git(tmp_path, "init", "-q")  # plans are runtime state, kept in the git directory
    store = PlanStore(tmp_path)
    with pytest.raises(ToolError):
        store.path("plan-../../x")
    with pytest.raises(Exception, match="no plan"):
        store.load("plan-0123456789ab")
    plan = store.create(goal="g", tasks=[{"title": "T", "spec": "T.\n"}], mode="m", planner="deterministic")
    assert store.list() == [plan]


def test_run_plan_follows_a_declared_handoff_transition(project: Path, module_home: Path) -> None:
    """A planner that declares `on: run_plan` hands its tasks to that mode; nothing else moves."""
    with serve(project, module_home, "--mode", "handoff") as s:
        plan = s.ok("propose_plan", {"goal": "- add a module named `ho.py` with a function `ho()`\n"})
        started = s.ok("run_plan", {"plan_id": plan["plan_id"]})
    assert started["mode"] == "lead"
    for job in started["jobs"]:
        status = json.loads((project / ".git" / "snodo" / "jobs" / job["job_id"] / "status.json").read_text())
        assert status["mode"] == "lead"
