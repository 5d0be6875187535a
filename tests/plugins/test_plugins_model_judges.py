"""The model-judged validators (llm, acceptance's prose part, protocol's model part) offline
through ``tooling.mock_response``: verdicts are read strictly, and every way of not reaching
one raises instead of passing."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import litellm
import pytest

from snodo.api import EnvironmentProblem, ValidationRequest, ValidatorFault
from snodo.plugin.host import PluginHost

MODEL = "openai/gpt-4o-mini"
Request = Callable[..., ValidationRequest]

PASS = json.dumps({"severity": "pass", "justification": "all criteria hold"})
BLOCK = "```json\n" + json.dumps({"severity": "blocker", "justification": "credentials are hard-coded"}) + "\n```"

# How each model-judged validator gets a request whose verdict comes from the model.
CASES: dict[str, dict[str, Any]] = {
    "llm": {"criteria": ("no hard-coded credentials",)},
    "acceptance": {"criteria": ("the code is easy to read",)},
    "protocol": {"spec": "add a hello module"},
}


def request_for(vtype: str, root: Path, vrequest: Request, reply: Any, **extra: Any) -> ValidationRequest:
    return vrequest(
        root,
        vtype,
        model=MODEL,
        tooling={"mock_response": reply},
        changed_files=("app.py",),
        **{**CASES[vtype], **extra},
    )


@pytest.fixture
def root(project: Callable[..., Path]) -> Path:
    return project({"app.py": "PASSWORD = 'hunter2'\n"})


@pytest.mark.parametrize("vtype", list(CASES))
def test_model_pass(host: PluginHost, root: Path, vrequest: Request, vtype: str) -> None:
    verdict = host.validate(request_for(vtype, root, vrequest, PASS))
    assert verdict is not None and verdict.severity == "pass"
    assert "all criteria hold" in verdict.justification or "all criteria hold" in json.dumps(verdict.details)


@pytest.mark.parametrize("vtype", list(CASES))
def test_model_blocker(host: PluginHost, root: Path, vrequest: Request, vtype: str) -> None:
    verdict = host.validate(request_for(vtype, root, vrequest, BLOCK))
    assert verdict is not None and verdict.severity == "blocker"
    assert "credentials are hard-coded" in verdict.justification or "credentials are hard-coded" in json.dumps(
        verdict.details
    )


@pytest.mark.parametrize("vtype", list(CASES))
@pytest.mark.parametrize(
    "reply",
    [
        "looks fine to me!",
        '{"severity": "fine", "justification": "ok"}',
        '{"severity": "pass"}',
        "[1, 2]",
        "",
    ],
)
def test_malformed_verdict_raises(host: PluginHost, root: Path, vrequest: Request, vtype: str, reply: str) -> None:
    with pytest.raises(ValidatorFault, match=f"validator '{vtype}-check'"):
        host.validate(request_for(vtype, root, vrequest, reply))


@pytest.mark.parametrize("vtype", list(CASES))
@pytest.mark.parametrize(
    "error",
    [
        litellm.AuthenticationError(message="bad key", llm_provider="openai", model=MODEL),
        litellm.APIConnectionError(message="no route to host", llm_provider="openai", model=MODEL),
        litellm.BadRequestError(message="model does not exist", llm_provider="openai", model=MODEL),
    ],
)
def test_provider_exception_raises(host: PluginHost, root: Path, vrequest: Request, vtype: str, error: Any) -> None:
    with pytest.raises(EnvironmentProblem, match=MODEL):
        host.validate(request_for(vtype, root, vrequest, error))


def test_llm_without_a_model_raises_never_passes(host: PluginHost, root: Path, vrequest: Request) -> None:
    with pytest.raises(ValidatorFault, match="no model configured for validator 'llm-check'"):
        host.validate(vrequest(root, "llm", criteria=("secure",)))


def test_llm_prompt_carries_spec_phase_and_changed_files(root: Path, vrequest: Request) -> None:
    from snodo_plugins.validators.llm_judge import prompt

    text = prompt(vrequest(root, "llm", spec="add login", criteria=("secure",), changed_files=("app.py",)))
    assert "post_execute" in text and "add login" in text and "- secure" in text
    assert "--- app.py\nPASSWORD = 'hunter2'" in text
    pre = prompt(vrequest(root, "llm", spec="add login", phase="pre_execute", changed_files=("app.py",)))
    assert "hunter2" not in pre


def test_protocol_model_can_only_make_it_stricter(host: PluginHost, root: Path, vrequest: Request) -> None:
    # The mode cannot merge: the table says blocker, and a lenient model does not undo it.
    verdict = host.validate(request_for("protocol", root, vrequest, PASS, spec="merge the release branch"))
    assert verdict is not None and verdict.severity == "blocker"
    assert verdict.details["model_severity"] == "pass"
    warn = json.dumps({"severity": "warn", "justification": "unclear"})
    verdict = host.validate(request_for("protocol", root, vrequest, warn))
    assert verdict is not None and verdict.severity == "warn"
