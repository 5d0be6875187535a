"""Outcome names and wording live in ``snodo/rules/outcomes.py`` alone; every text is built from it."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

import snodo
from snodo.mcp.catalog import TOOLS, build_instructions, plan_mode
from snodo.protocol.capabilities import tools_for
from snodo.protocol.models import Mode, Protocol, Transition, Validator
from snodo.rules.outcomes import AGENT_INSTRUCTION, HALT_OUTCOMES, MEANING, OUTCOMES, RUN_NEXT_STEP, VALIDATE_NEXT_STEP

SNODO = Path(snodo.__file__).parent
# Phrases only the wording module may hold: a copy anywhere else is a second home.
PHRASES = (
    "no human decision can override",
    "no decision can override",
    "single-use token was recorded",
    "single-use token is recorded",
    "could not reach a verdict (",
    "snodo run --resume {task_id}",
    "snodo authorize {decision_id}",
)


def test_outcome_wording_has_one_home() -> None:
    offenders = sorted(
        f"{p.relative_to(SNODO).as_posix()}: {phrase!r}"
        for p in SNODO.rglob("*.py")
        if p.name != "outcomes.py"
        for phrase in PHRASES
        if phrase in p.read_text().lower()
    )
    assert offenders == []


def test_every_outcome_has_wording_for_agents_and_people() -> None:
    assert OUTCOMES == ("pass", "escalate", "blocker", "validator_error")
    for outcome in OUTCOMES:
        assert MEANING[outcome] and AGENT_INSTRUCTION[outcome] and VALIDATE_NEXT_STEP[outcome]
    assert set(RUN_NEXT_STEP) == {"completed", *HALT_OUTCOMES}


def _planner(transitions: tuple[Transition, ...]) -> tuple[Protocol, Mode]:
    planner = Mode(mode_id="planner", tools=("read", "plan"), validators=("v",), coder="mock", transitions=transitions)
    producer = Mode(mode_id="producer", tools=("read", "validate", "dispatch"), validators=("v",), coder="mock")
    protocol = Protocol(
        protocol_id="p",
        name="P",
        modes=(planner, producer),
        validators=(Validator(validator_id="v", validator_type="acceptance"),),
    )
    return protocol, planner


@pytest.mark.parametrize(
    ("transitions", "target", "said"),
    [
        ((Transition(to="producer", on="run_plan"),), "producer", "in the 'producer' mode"),
        ((), "planner", "in this mode"),
    ],
)
def test_run_plan_instructions_name_the_mode_the_jobs_run_in(
    transitions: tuple[Transition, ...], target: str, said: str
) -> None:
    """The server instructions describe what the host does: jobs go to the ``on: run_plan``
    transition's mode (the one rule, ``plan_mode``, which the host's run_plan calls)."""
    protocol, planner = _planner(transitions)
    tools = tools_for(planner.tools)
    assert "run_plan" in tools
    text = build_instructions(protocol, planner, tools)
    assert plan_mode(planner) == target
    sentence = next(line for line in text.splitlines() if "run_plan(plan_id)" in line)
    assert said in sentence
    named = set(re.findall(r"[A-Za-z_]+", text)) & set(TOOLS)
    assert named <= tools


def test_the_catalog_lists_the_outcomes_from_the_one_home() -> None:
    assert all(o in TOOLS["validate_task"].description for o in OUTCOMES)
    assert all(o in TOOLS["get_job_status"].description for o in HALT_OUTCOMES)
