"""Property: a protocol `snodo protocol check` accepts never fails a run for a reason the check
could have named.

Hypothesis draws protocols from the space a user writes (modes, capabilities, the built-in
validators in either phase with caps and settings, policies, predicates, execution limits,
coders and their settings; some of them wrong on purpose). Each one the check accepts is run
with `snodo run --mock` (a real subprocess) on a small git project: the run must end in a
documented outcome, never `internal_error`, and a `validator_error` must never be one the
check could have seen (an unknown setting, a missing model, an unjudged phase, …).
"""

from __future__ import annotations

import json
import subprocess
import tempfile
from pathlib import Path
from typing import Any

import pytest
import yaml
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from snodo.base.errors import ProtocolError
from snodo.plugin.host import get_plugin_manager
from snodo.protocol import check, parse_protocol
from tests.protocol.markers import git, make_sample_project, snodo_argv, snodo_env

DOCUMENTED = {None, "blocker", "escalate", "validator_error", "environment_error"}
#: Fragments of validator errors that a well-formedness check could have reported instead.
CHECKABLE = (
    "unknown tooling key",
    "unknown coder_config key",
    "no model configured",
    "tooling.timeout must be",
    "no validator produced",
    "is installed",
    "no validator type named",
)

SPECS = (
    "add a hello module",
    "add a greeting module\n\nAcceptance criteria:\n- `greeting.py` exists\n- tests pass\n",
    "add a farewell module\n\nAcceptance criteria:\n- the code is pleasant to read\n",
    "add a counter module\n\nDone when:\n- function `counter` is defined\n- `nothing.txt` does not exist\n",
)

CAPABILITIES = ("read", "edit", "test", "validate", "commit", "review", "assess", "decide", "plan")
COMMANDS = ("python -m pytest -q", ["python", "-m", "pytest", "-q"], "python -m pytest -q -x")


def now_and_then(draw: st.DrawFn) -> bool:
    """True about once in ten draws (and not where hypothesis shrinks to)."""
    return draw(st.integers(0, 9)) == 9


@st.composite
def validator(draw: st.DrawFn, vid: str, phase: str | None = None, types: tuple[str, ...] = ()) -> dict[str, Any]:
    vtype = draw(st.sampled_from(types or ("pytest", "acceptance", "protocol", "llm")))
    v: dict[str, Any] = {
        "validator_id": vid,
        "validator_type": vtype,
        "evaluation_phase": phase or draw(st.sampled_from(["pre_execute", "post_execute"])),
    }
    cap = draw(st.sampled_from([None, "pass", "warn", "blocker"]))
    if cap:
        v["severity_cap"] = cap
    tooling: dict[str, Any] = {}
    if draw(st.booleans()):
        tooling["timeout"] = draw(st.sampled_from([120, 240.5]))
    if vtype in ("pytest", "acceptance") and draw(st.booleans()):
        tooling["command"] = draw(st.sampled_from(COMMANDS))
    if now_and_then(draw):  # a setting the plugin does not declare: the check must refuse it
        tooling[draw(st.sampled_from(["timout", "comand", "retries"]))] = 1
    if tooling:
        v["tooling"] = tooling
    if vtype in ("protocol", "llm", "acceptance") and draw(st.booleans()):
        v["criteria"] = draw(st.sampled_from([["stays in scope"], ["tests pass"], []]))
    return v


@st.composite
def protocols(draw: st.DrawFn) -> dict[str, Any]:
    judged = ("pytest", "acceptance", "protocol")
    validators = [
        draw(validator("v0", "pre_execute", judged)),
        draw(validator("v1", "post_execute", judged)),
        *(draw(validator(f"v{i}")) for i in range(2, 2 + draw(st.integers(0, 2)))),
    ]
    ids = [v["validator_id"] for v in validators]
    used = ["v0", "v1", *draw(st.lists(st.sampled_from(ids[2:] or ["v0"]), max_size=2, unique=True))]
    if now_and_then(draw):  # a phase left unjudged: the check must refuse it
        used.remove(draw(st.sampled_from(["v0", "v1"])))
    used = list(dict.fromkeys(used))
    producer: dict[str, Any] = {
        "mode_id": "producer",
        "tools": ["dispatch", *draw(st.lists(st.sampled_from(CAPABILITIES), max_size=4, unique=True))],
        "validators": used,
        "coder": draw(st.sampled_from(["mock", "litellm"])),
    }
    if producer["coder"] == "litellm":
        producer["coder_config"] = {"model": "openai/gpt-4o-mini"}
    elif now_and_then(draw):
        producer["coder_config"] = {"model": "leftover"}  # the mock coder declares no `model`
    constraints = []
    for i, predicate in enumerate(
        draw(
            st.lists(
                st.sampled_from(["files_in_scope", "tests_exist_for_modified", "no_secrets_in_diff"]),
                max_size=2,
                unique=True,
            )
        )
    ):
        c: dict[str, Any] = {"constraint_id": f"c{i}", "predicate": predicate}
        if predicate == "files_in_scope":
            c["params"] = {"allowed": draw(st.sampled_from([["**"], ["**/*.py"], ["*.py", "tests/**"]]))}
        constraints.append(c)
    if constraints:
        producer["constraints"] = constraints
    modes = [producer]
    if draw(st.booleans()):
        modes.append(
            {
                "mode_id": "reviewer",
                "tools": draw(
                    st.lists(st.sampled_from(("review", "approve", "merge", "test")), max_size=3, unique=True)
                ),
                "validators": draw(st.lists(st.sampled_from(ids), max_size=2, unique=True)),
                "coder": "mock",
            }
        )
    doc: dict[str, Any] = {
        "protocol_id": "drawn",
        "name": "Drawn by hypothesis",
        "version": "1.0.0",
        "modes": modes,
        "validators": validators,
        "disagreement_policy": draw(st.sampled_from(["unanimous", "majority", "quorum", "any"])),
        "execution": {
            "max_iterations": draw(st.integers(1, 6)),
            "max_recovery_depth": draw(st.integers(0, 2)),
            "max_total_fix_attempts": draw(st.integers(0, 2)),
        },
    }
    if doc["disagreement_policy"] == "quorum":
        doc["quorum_threshold"] = draw(st.sampled_from([0.5, 0.66, 1.0]))
    return doc


HOST = get_plugin_manager()


@pytest.mark.slow
@settings(
    max_examples=24,
    deadline=None,
    derandomize=True,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)
@given(doc=protocols(), spec=st.sampled_from(SPECS))
def test_accepted_protocols_end_in_documented_outcomes(doc: dict[str, Any], spec: str) -> None:
    text = yaml.safe_dump(doc, sort_keys=False)
    try:
        errors = [v for v in check(parse_protocol(text), HOST) if v.level == "error"]
    except ProtocolError:
        errors = ["refused at load"]  # type: ignore[list-item]
    if errors:
        event("refused by the check")
        return  # the property is about what the check accepts; refusals are the table test's
    with tempfile.TemporaryDirectory() as tmp:
        project = make_sample_project(Path(tmp) / "project")
        (project / ".snodo").mkdir()
        (project / ".snodo" / "protocol.yml").write_text(text)
        git(project, "add", "-A")
        git(project, "commit", "-qm", "protocol")
        r = subprocess.run(
            snodo_argv("run", spec, "--mock", "--json"),
            cwd=project,
            env=snodo_env(Path(tmp) / "home"),
            capture_output=True,
            text=True,
            timeout=600,
        )
    where = f"protocol:\n{text}\nspec: {spec!r}\nexit {r.returncode}\n{r.stdout}\n{r.stderr}"
    assert "Traceback" not in r.stderr, where
    assert r.returncode in (0, 1), where
    payload = json.loads(r.stdout)
    assert payload["status"] in ("completed", "halted"), where
    assert payload["outcome"] in DOCUMENTED, where
    event(f"ran: {payload['outcome'] or 'completed'}")
    assert (payload["status"] == "completed") == (payload["outcome"] is None), where
    if payload["outcome"] == "validator_error":
        said = " ".join(
            [str(payload.get("message", ""))]
            + [f"{v.get('justification', '')} {v.get('error') or ''}" for v in payload.get("validators", [])]
        )
        assert not [c for c in CHECKABLE if c in said], where
