"""The tool surface of `snodo serve` per mode of the team template, seen by a real SDK client.

What an agent host sees must be exactly SPEC §4: the union of the mode's capability tools,
nothing else listed, every other name refused as unknown (also names another mode has),
annotations on every tool, and instructions that never invite a call the server refuses.
The expected sets are written out here from the SPEC table, not computed by the code
under test.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import re
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from mcp_harness import Served, audit, make_project, serve, server_env, snodo

from snodo.protocol.capabilities import ALL_TOOLS, READ_ONLY_TOOLS
from snodo.state.atomic import canonical_json

# SPEC §4 applied by hand to snodo/protocol/templates/team.yml.
TEAM = {
    # read, edit, test, validate, dispatch, commit
    "producer": {
        "read_file",
        "list_files",
        "write_file",
        "delete_file",
        "create_directory",
        "run_tests",
        "validate_task",
        "dispatch_task",
        "get_job_status",
        "list_jobs",
        "stage_files",
        "commit",
    },
    # review, test, approve, merge, decide
    "reviewer": {
        "read_file",
        "list_files",
        "read_diff",
        "get_status",
        "run_tests",
        "stage_files",
        "commit",
        "create_branch",
        "merge_branch",
        "delete_branch",
        "propose_adjudicate",
    },
    # read, plan
    "planner": {"read_file", "list_files", "propose_plan", "decompose", "generate_spec", "get_plan", "run_plan"},
}
# Plausible arguments, so a refusal can only be because of the name.
ARGS = {
    "read_file": {"path": "README.md"},
    "list_files": {},
    "write_file": {"path": "x.txt", "content": "x"},
    "delete_file": {"path": "README.md"},
    "create_directory": {"path": "d"},
    "run_tests": {},
    "validate_task": {"task_id": "t1", "task_spec": "add a module"},
    "dispatch_task": {"task_spec": "add a module"},
    "get_job_status": {"job_id": "job-1"},
    "list_jobs": {},
    "propose_adjudicate": {"decision_id": "dec-1", "decision": "approve", "justification": "fine"},
    "read_diff": {},
    "get_status": {},
    "stage_files": {"paths": ["README.md"]},
    "commit": {"message": "m"},
    "create_branch": {"name": "b"},
    "merge_branch": {"name": "b"},
    "delete_branch": {"name": "b"},
    "propose_plan": {"goal": "add a module"},
    "decompose": {"spec": "add a module"},
    "generate_spec": {"task": "add a module"},
    "get_plan": {"plan_id": "plan-000000000000"},
    "run_plan": {"plan_id": "plan-000000000000"},
}


def test_expected_sets_cover_the_capability_table() -> None:
    assert set(ARGS) == set(ALL_TOOLS)


@pytest.fixture(scope="module")
def team(module_dir: Path, module_home: Path) -> Path:
    return make_project(module_dir / "team", template="team", home=module_home)


@pytest.fixture(scope="module", params=sorted(TEAM))
def served(request: pytest.FixtureRequest, team: Path, module_home: Path) -> Iterator[tuple[str, Served]]:
    with serve(team, module_home, "--mode", request.param) as s:
        yield request.param, s
    assert "Traceback" not in s.stderr()


def test_tools_list_is_exactly_the_modes_union(served: tuple[str, Served]) -> None:
    mode, s = served
    names = [t.name for t in s.list_tools()]
    assert len(names) == len(set(names))
    assert set(names) == TEAM[mode]


def test_every_other_name_is_refused_as_unknown(served: tuple[str, Served], team: Path) -> None:
    mode, s = served
    before = team.joinpath("README.md").read_bytes()
    others = [*sorted(ALL_TOOLS - TEAM[mode]), "authorize", "approve_decision", "snodo_authorize"]
    for name in others:
        text = s.refused(name, ARGS.get(name, {}))
        assert "Unknown tool" in text and repr(name) in text
    assert team.joinpath("README.md").read_bytes() == before
    refused = {r["data"]["tool"] for r in audit(team, "tool_refused") if r["mode"] == mode}
    assert set(others) <= refused


def test_instructions_name_only_served_tools(served: tuple[str, Served]) -> None:
    mode, s = served
    text = s.instructions
    named = set(re.findall(r"[A-Za-z_]+", text)) & ALL_TOOLS
    assert named <= TEAM[mode], f"instructions of {mode} name tools it lacks: {named - TEAM[mode]}"
    assert f"'{mode}'" in text
    for outcome in ("pass", "escalate", "blocker", "validator_error"):
        assert f"- {outcome}:" in text
    assert "snodo authorize <decision_id>" in text
    assert "out of band" in text


def test_every_tool_is_annotated_and_described(served: tuple[str, Served]) -> None:
    _, s = served
    for tool in s.list_tools():
        assert tool.description, tool.name
        hints = tool.annotations
        assert hints is not None, tool.name
        assert hints.read_only_hint is (tool.name in READ_ONLY_TOOLS), tool.name
        if tool.name in ("write_file", "delete_file", "merge_branch", "delete_branch"):
            assert hints.destructive_hint is True, tool.name
        schema = tool.input_schema
        assert schema["type"] == "object"
        for prop, spec in schema.get("properties", {}).items():
            assert spec.get("description"), f"{tool.name}.{prop} has no description"


def test_calls_are_audited_with_a_hash_of_the_arguments(served: tuple[str, Served], team: Path) -> None:
    mode, s = served
    args = {"path": "README.md"}
    assert s.ok("read_file", args)["content"] == "# project\n"
    record = [r for r in audit(team, "tool_call") if r["data"]["tool"] == "read_file"][-1]
    assert record["mode"] == mode
    assert record["data"]["args_sha256"] == hashlib.sha256(canonical_json(args)).hexdigest()
    assert "README" not in json.dumps(record["data"])


def test_bad_arguments_are_tool_errors_that_say_why(served: tuple[str, Served]) -> None:
    _, s = served
    assert "missing required argument 'path'" in s.refused("read_file", {})
    assert "unexpected argument" in s.refused("read_file", {"path": "README.md", "pth": "x"})
    assert "must be a string" in s.refused("read_file", {"path": 3})


# ---------------------------------------------------------------- protocol eras


def test_modern_era_client_sees_the_same_surface(team: Path, module_home: Path) -> None:
    with serve(team, module_home, "--mode", "planner", era="modern") as s:
        assert s.protocol_version == "2026-07-28"
        assert s.tool_names() == TEAM["planner"]
        assert "snodo authorize" in s.instructions
        assert s.ok("read_file", {"path": "README.md"})["content"] == "# project\n"
        assert "Unknown tool" in s.refused("write_file", ARGS["write_file"])


def test_older_handshake_version_client_sees_the_same_surface(team: Path, module_home: Path) -> None:
    with serve(team, module_home, "--mode", "reviewer", version="2025-03-26") as s:
        assert s.protocol_version == "2025-03-26"
        assert s.tool_names() == TEAM["reviewer"]
        assert "Unknown tool" in s.refused("validate_task", ARGS["validate_task"])
        assert s.ok("list_files")["count"] >= 1


def test_default_mode_is_the_projects_current_mode(team: Path, module_home: Path) -> None:
    with serve(team, module_home) as s:
        assert s.tool_names() == TEAM["producer"]


# ------------------------------------------------------------ refusing to serve


def test_unknown_mode_exits_4_naming_the_available_modes(team: Path, module_home: Path) -> None:
    proc = snodo(team, module_home, "serve", "--mode", "nosuch", stdin="", timeout=60)
    assert proc.returncode == 4, proc  # could not run (the exit-code table)
    assert "nosuch" in proc.stderr
    for mode in TEAM:
        assert mode in proc.stderr
    assert proc.stdout == ""
    assert "Traceback" not in proc.stderr


@pytest.mark.parametrize(
    ("text", "expect"),
    [
        ("protocol_id: p\nname: P\nmodes: [{mode_id: m, tools: [read]}]\nvalidators: []\nbogus: 1\n", "bogus"),
        (
            "protocol_id: p\nname: P\nmodes:\n  - {mode_id: a, tools: [merge]}\n  - {mode_id: b, tools: [merge]}\n"
            "validators: [{validator_id: v, validator_type: acceptance}]\n",
            "WF1",
        ),
        ("protocol_id: [unterminated\n", "bad.yml"),
    ],
)
def test_a_protocol_that_fails_to_load_is_never_served(team: Path, module_home: Path, text: str, expect: str) -> None:
    (team / ".snodo" / "bad.yml").write_text(text)
    proc = snodo(team, module_home, "serve", "--protocol", ".snodo/bad.yml", stdin="", timeout=60)
    assert proc.returncode != 0, proc
    assert expect in proc.stderr, proc
    assert proc.stdout == ""
    assert "Traceback" not in proc.stderr


def test_no_protocol_is_never_served(tmp_path: Path, module_home: Path) -> None:
    proc = snodo(tmp_path, module_home, "serve", stdin="", timeout=60)
    assert proc.returncode != 0, proc
    assert "protocol" in proc.stderr
    assert proc.stdout == ""


def test_the_cli_imports_the_sdk_only_to_serve() -> None:
    code = (
        "import sys\n"
        "import snodo.cli.main, snodo.cli.serve_cmd, snodo.mcp, snodo.mcp.catalog, snodo.mcp.host\n"
        "heavy = sorted(m for m in sys.modules if m.split('.')[0] in ('mcp', 'mcp_types', 'litellm'))\n"
        "assert not heavy, heavy\n"
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr


# ------------------------------------------------------------------ disconnects


def _start(team: Path, home: Path) -> subprocess.Popen[bytes]:
    return subprocess.Popen(
        [sys.executable, "-m", "snodo", "serve", "--mode", "producer"],
        cwd=team,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env={**os.environ, **server_env(home)},
    )


def _send(proc: subprocess.Popen[bytes], message: dict[str, object]) -> None:
    assert proc.stdin is not None
    proc.stdin.write((json.dumps(message) + "\n").encode())
    proc.stdin.flush()


def _handshake(proc: subprocess.Popen[bytes]) -> None:
    _send(
        proc,
        {
            "jsonrpc": "2.0",
            "id": 1,
            "method": "initialize",
            "params": {
                "protocolVersion": "2025-06-18",
                "capabilities": {},
                "clientInfo": {"name": "raw", "version": "1"},
            },
        },
    )
    assert proc.stdout is not None
    assert b'"protocolVersion":"2025-06-18"' in proc.stdout.readline()
    _send(proc, {"jsonrpc": "2.0", "method": "notifications/initialized"})


def _finish(proc: subprocess.Popen[bytes]) -> int | None:
    """Wait for the server, close every pipe, and check it said nothing alarming."""
    try:
        code = proc.wait(timeout=30)
    finally:
        for pipe in (proc.stdin, proc.stdout):
            if pipe is not None and not pipe.closed:
                with contextlib.suppress(BrokenPipeError):
                    pipe.close()
        stderr = proc.stderr.read().decode() if proc.stderr else ""
        if proc.stderr is not None:
            proc.stderr.close()
    assert "Traceback" not in stderr and "error" not in stderr, stderr
    return code


def test_end_of_input_ends_the_server_cleanly(team: Path, module_home: Path) -> None:
    proc = _start(team, module_home)
    _handshake(proc)
    _send(proc, {"jsonrpc": "2.0", "id": 2, "method": "tools/list"})
    assert proc.stdout is not None
    assert b'"read_file"' in proc.stdout.readline()
    assert proc.stdin is not None
    proc.stdin.close()
    assert _finish(proc) == 0


def test_a_client_that_vanishes_leaves_no_traceback(team: Path, module_home: Path) -> None:
    proc = _start(team, module_home)
    _handshake(proc)
    assert proc.stdout is not None and proc.stdin is not None
    proc.stdout.close()  # the client is gone: every answer now meets a broken pipe
    try:
        for i in range(3):
            _send(proc, {"jsonrpc": "2.0", "id": 10 + i, "method": "tools/list"})
            time.sleep(0.2)
        proc.stdin.close()
    except BrokenPipeError:
        pass
    assert _finish(proc) == 0
