"""`snodo serve` answers the handshake before the governance stack is imported.

``initialize`` and ``tools/list`` are answered from the protocol, the mode and the
catalogue; the tool host (governance service, tokens and audit, engine stores) is built
after, off the handshake's path — yet the first call still works and is audited.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from mcp_harness import audit, make_project, serve, server_env

PROTOCOL = """\
protocol_id: lazy
name: Lazy start
modes:
  - mode_id: producer
    tools: [read, validate]
    validators: [scope]
validators:
  - {validator_id: scope, validator_type: protocol}
"""

#: What the handshake must not wait for.
HEAVY = (
    "snodo.governance",
    "snodo.engine",
    "snodo.state.tokens",
    "snodo.state.audit",
    "snodo.mcp.host",
    "snodo.state.jws",
)

PROBE = f"""
import sys
from snodo.cli.common import load_project
from snodo.mcp.server import Served, build_server

heavy = {HEAVY!r}
loaded, plugins = load_project(None)
served = Served(loaded, plugins, loaded.protocol.mode("producer"))
build_server(served)  # everything initialize and tools/list are answered from
print(sorted(m for m in sys.modules if m.startswith(heavy)))
served.host()
print(all(any(m.startswith(h) for m in sys.modules) for h in heavy))
"""


def test_the_server_is_ready_to_answer_initialize_without_the_governance_stack(tmp_path: Path) -> None:
    root = make_project(tmp_path / "repo", PROTOCOL)
    out = subprocess.run(
        [sys.executable, "-I", "-c", PROBE],
        cwd=root,
        env=server_env(tmp_path / "home"),
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert out.returncode == 0, out.stderr
    before, after = out.stdout.splitlines()[-2:]
    assert before == "[]", f"imported before the handshake: {before}"
    assert after == "True"  # the host, once built, has all of it


def test_the_first_call_after_the_handshake_is_served_and_audited(tmp_path: Path) -> None:
    root = make_project(tmp_path / "repo", PROTOCOL)
    with serve(root, tmp_path / "home") as s:
        assert "validate_task" in s.instructions
        assert s.tool_names() >= {"validate_task", "read_file"}
        payload = s.ok("validate_task", {"task_id": "t-1", "task_spec": "add a module"})
        assert [r["validator_id"] for r in payload["results"]] == ["scope"]  # the validator judged it
    events = [e["event"] for e in audit(root)]
    assert events.count("tool_call") == 1 and "validate" in events
    assert events[-1] == "serve_stopped"
