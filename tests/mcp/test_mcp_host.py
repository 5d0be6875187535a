"""The tool host and the catalogue in-process: rules that need no client to be checked.

The end-to-end behaviour is proven through a real client in the other modules; here the
cases a client cannot provoke (a job that fails to start) and the exhaustive ones (the
instructions of every combination of capabilities) are cheap to check directly.
"""

from __future__ import annotations

import hashlib
import itertools
import re
from pathlib import Path

import pytest
from mcp_harness import audit, make_project

from snodo.engine.jobs import JobStore
from snodo.governance.service import Project
from snodo.mcp.catalog import TOOLS, build_instructions
from snodo.mcp.host import ToolHost, arguments_sha256, check_arguments
from snodo.plugin.host import get_plugin_manager
from snodo.protocol import load_protocol
from snodo.protocol.capabilities import ALL_TOOLS, CAPABILITY_TOOLS, tools_for
from snodo.protocol.models import Mode, Protocol, Validator
from snodo.rules.taskids import spec_sha256
from snodo.state.atomic import canonical_json

PROTOCOL = """\
protocol_id: host
name: Host test
version: "1.0.0"
modes:
  - mode_id: producer
    tools: [read, edit, validate, dispatch]
    validators: [criteria, suite]
    coder: mock
validators:
  - validator_id: criteria
    validator_type: acceptance
    evaluation_phase: pre_execute
    severity_cap: warn
  - {validator_id: suite, validator_type: pytest, evaluation_phase: post_execute}
"""
SPEC = "Add a module named `hello.py`.\n"


@pytest.fixture
def host(tmp_path: Path) -> ToolHost:
    root = make_project(tmp_path / "repo", PROTOCOL)
    plugins = get_plugin_manager()
    return ToolHost(Project(load_protocol(root / ".snodo" / "protocol.yml", plugins), plugins))


def test_a_dispatch_that_fails_to_start_consumes_no_token(host: ToolHost, monkeypatch: pytest.MonkeyPatch) -> None:
    root = host.project.root
    assert host.call("validate_task", {"task_id": "t1", "task_spec": SPEC}).data["status"] == "pass"  # type: ignore[index]

    def refuse(self: JobStore, job_id: str, **_kw: object) -> int:
        raise OSError("no more processes")

    monkeypatch.setattr(JobStore, "start_background", refuse)
    reply = host.call("dispatch_task", {"task_spec": SPEC, "task_id": "t1"})
    assert not reply.ok and "could not be started" in reply.message and "no token was used" in reply.message
    assert not audit(root, "token_consumed") and not audit(root, "dispatch_request")
    (job,) = JobStore(root).list()
    assert job["status"] == "halted" and job["outcome"] == "internal_error"
    # The token is still there for a dispatch that does start.
    assert host._tokens.keys() == {("t1", spec_sha256(SPEC))}
    monkeypatch.setattr(JobStore, "start_background", lambda self, job_id, **kw: 0)
    reply = host.call("dispatch_task", {"task_spec": SPEC, "task_id": "t1"})
    assert reply.ok and reply.data and reply.data["token_consumed"] is True
    (consumed,) = audit(root, "token_consumed")
    assert consumed["data"]["consumer"] == f"mcp-dispatch:{reply.data['job_id']}"
    assert not host._tokens


def test_the_token_never_leaves_the_host(host: ToolHost) -> None:
    reply = host.call("validate_task", {"task_id": "t2", "task_spec": SPEC})
    (token,) = host._tokens.values()
    assert token not in reply.text()


def test_a_spec_whose_validation_failed_is_not_kept_to_validate_again(host: ToolHost) -> None:
    # An unpaired surrogate cannot be hashed: the validation fails before any outcome.
    assert not host.call("validate_task", {"task_id": "t3", "task_spec": "Add \ud800 here.\n"}).ok
    again = host.call("validate_task", {"task_id": "t3"})
    assert not again.ok and "has not validated task 't3'" in again.message, again.message


def test_arguments_are_hashed_canonically() -> None:
    args = {"path": "a", "content": "secret"}
    assert arguments_sha256(args) == hashlib.sha256(canonical_json(args)).hexdigest()
    assert arguments_sha256({"content": "secret", "path": "a"}) == arguments_sha256(args)
    assert len(arguments_sha256({"x": float("nan")})) == 64  # never a crash on odd input


def test_argument_checks() -> None:
    assert check_arguments("stage_files", {"paths": ["a"]}) is None
    assert "non-empty list" in (check_arguments("stage_files", {"paths": []}) or "")
    assert "non-empty list" in (check_arguments("stage_files", {"paths": "a"}) or "")
    assert "true or false" in (check_arguments("read_diff", {"staged": "yes"}) or "")
    assert check_arguments("list_files", {"path": None}) is None
    assert "takes: no arguments" in (check_arguments("list_jobs", {"x": 1}) or "")


def test_every_definition_fits_the_capability_table() -> None:
    # (That TOOLS covers ALL_TOOLS, and that read-only follows READ_ONLY_TOOLS, are the
    # catalogue's own definitions, asserted where they are made; here: what they imply.)
    for name, tool in TOOLS.items():
        hints = tool.annotations(name)
        assert ("destructiveHint" in hints) is not hints["readOnlyHint"]
        schema = tool.input_schema()
        assert schema["additionalProperties"] is False
        assert all(p.description for p in tool.params)


def _protocol(mode: Mode) -> Protocol:
    return Protocol(
        protocol_id="p",
        name="P",
        modes=(mode,),
        validators=(Validator(validator_id="v", validator_type="acceptance"),),
        protected_paths=("secrets",),
    )


@pytest.mark.parametrize("size", [1, 2, 3])
def test_instructions_never_name_a_tool_the_mode_lacks(size: int) -> None:
    """Every combination of up to three capabilities (descriptions that name tools are the
    protocol author's words and out of scope, so the modes here have none)."""
    for caps in itertools.combinations(sorted(CAPABILITY_TOOLS), size):
        mode = Mode(mode_id="m", tools=caps, validators=("v",), coder="mock")
        tools = tools_for(mode.tools)
        text = build_instructions(_protocol(mode), mode, tools)
        named = set(re.findall(r"[A-Za-z_]+", text)) & ALL_TOOLS
        assert named <= tools, (caps, named - tools)
        assert "snodo authorize" in text
        for outcome in ("pass", "escalate", "blocker", "validator_error"):
            assert f"- {outcome}:" in text


def test_a_pass_in_a_mode_that_cannot_dispatch_does_not_point_at_dispatch_task(tmp_path: Path) -> None:
    text = PROTOCOL.replace("tools: [read, edit, validate, dispatch]", "tools: [read, validate]")
    root = make_project(tmp_path / "repo", text)
    plugins = get_plugin_manager()
    host = ToolHost(Project(load_protocol(root / ".snodo" / "protocol.yml", plugins), plugins))
    reply = host.call("validate_task", {"task_id": "t3", "task_spec": SPEC})
    assert reply.ok and reply.data is not None
    assert reply.data["status"] == "pass" and reply.data["token_issued"] is True
    assert "dispatch_task" not in reply.data["instruction"]
    assert "dispatch_task" not in build_instructions(host.project.protocol, host.project.mode, host.tools)
