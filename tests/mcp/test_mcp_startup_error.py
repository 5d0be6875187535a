"""A server that cannot start still reaches the person through the host (issue 28.4).

Real ``snodo serve`` under the official SDK client: with an unknown mode, or a protocol
whose working copy differs from the committed one, the handshake completes, the
instructions name the problem and the fix, the only tool listed is ``unavailable`` (its
description the same message; calling it, or a governed tool's name, returns the message as
an error and runs nothing), and the process exits non-zero once the host leaves.
"""

from __future__ import annotations

import time
from pathlib import Path

import pytest
from mcp.shared.exceptions import MCPError
from mcp_harness import audit, git, make_project, serve, snodo

PROTOCOL = """\
protocol_id: startup
name: Startup test
modes:
  - mode_id: dev
    tools: [read, validate]
    validators: [criteria]
validators:
  - {validator_id: criteria, validator_type: acceptance, evaluation_phase: pre_execute}
"""


def _served_failure(root: Path, home: Path, *args: str) -> tuple[str, str]:
    """The instructions, and the one error every listed or governed name answers with."""
    with serve(root, home, *args) as served:
        instructions = served.instructions
        (tool,) = served.list_tools()  # no governed tool: only the one that says why
        assert tool.name == "unavailable" and tool.description == instructions
        error = served.refused("unavailable")
        assert served.refused("read_file", {"path": "README.md"}) == error  # nothing governed runs
    assert not audit(root, "tool_call")
    return instructions, error


def test_an_unknown_mode_is_told_through_the_handshake(tmp_path: Path) -> None:
    root = make_project(tmp_path / "repo", PROTOCOL)
    started = time.monotonic()
    instructions, error = _served_failure(root, tmp_path / "home", "--mode", "nosuch")
    for text in (instructions, error):
        assert "snodo could not start" in text and "nosuch" in text and "dev" in text, text
        assert "no governed tool" in text
    assert time.monotonic() - started < 30
    # a person in a terminal (stdin at end) still gets the plain error and exit status
    plain = snodo(root, tmp_path / "home", "serve", "--mode", "nosuch", stdin="")
    assert plain.returncode != 0 and "nosuch" in plain.stderr


def test_an_uncommitted_protocol_edit_is_refused_with_the_diff(tmp_path: Path) -> None:
    root = make_project(tmp_path / "repo", PROTOCOL)
    git(root, "add", ".snodo/protocol.yml")
    git(root, "commit", "-qm", "protocol")
    path = root / ".snodo" / "protocol.yml"
    path.write_text(PROTOCOL.replace("tools: [read, validate]", "tools: [read, edit, validate]"))
    _, error = _served_failure(root, tmp_path / "home", "--mode", "dev")
    assert "not the one in force" in error and "+    tools: [read, edit, validate]" in error, error
    assert "commit it" in error
    refused = snodo(root, tmp_path / "home", "run", "--mock", "a task", stdin="")
    assert refused.returncode != 0 and "not the one in force" in refused.stderr, refused.stderr
    assert "1 line(s) added, 1 removed" in refused.stderr
    check = snodo(root, tmp_path / "home", "protocol", "check", stdin="")
    assert check.returncode == 0 and "differs from the version in force" in check.stderr, check.stderr


def test_codex_gets_the_failure_as_its_listing_error(tmp_path: Path) -> None:
    """Codex stops on a failed listing (with the printed `required = true`) and prints its
    error, while it shows a tool's failure only as "failed": it gets the error, no tool."""
    root = make_project(tmp_path / "repo", PROTOCOL)
    with serve(root, tmp_path / "home", "--mode", "nosuch", client="codex-mcp-client") as served:
        assert "nosuch" in served.instructions
        with pytest.raises(MCPError) as info:
            served.list_tools()
    assert info.value.message == served.instructions
