"""snodo inside a REAL agent host: the opencode CLI from the npm registry, configured with
exactly what ``snodo serve --print-config opencode`` prints, driven by a scripted model on
the local OpenAI-compatible server (``tests/plugins/model_server.py``).

Opt-in: ``tox -e real-hosts`` installs the CLIs with npm and sets ``SNODO_REAL_HOSTS_PREFIX``
(the npm ``--prefix``); without it these tests skip. (Codex is installed too and its printed
profile is checked by ``codex mcp get``; driving it needs a Responses-API model server,
which the local one is not.)
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
from mcp_harness import audit, git, make_project, snodo

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "plugins"))
from model_server import ModelServer

PREFIX = os.environ.get("SNODO_REAL_HOSTS_PREFIX")
pytestmark = [pytest.mark.slow, pytest.mark.skipif(not PREFIX, reason="opt-in: tox -e real-hosts")]

PROTOCOL = """\
protocol_id: real
name: Real host
modes:
  - mode_id: producer
    tools: [read, edit, test, validate, dispatch]
    validators: [scope, suite]
    coder: mock
    coder_config: {files: {"done.txt": "done\\n"}}
validators:
  - {validator_id: scope, validator_type: protocol}
  - {validator_id: suite, validator_type: pytest, evaluation_phase: post_execute}
"""
#: Longer than opencode's own default call limit: the printed timeout must cover it.
SLOW = 65
SLOW_TEST = f"""\
import time
from pathlib import Path

def test_slow():
    if (Path(__file__).parent.parent / "slow.flag").exists():
        time.sleep({SLOW})
"""


def _opencode(prefix: Path) -> Path:
    return prefix / "node_modules" / ".bin" / "opencode"


def _printed(root: Path, home: Path) -> dict[str, Any]:
    """Exactly what `snodo serve --print-config opencode` prints for this project."""
    result: dict[str, Any] = json.loads(snodo(root, home, "serve", "--print-config", "opencode", check=True).stdout)
    return result


def _run_opencode(
    tmp_path: Path, root: Path, server: ModelServer, printed: dict[str, Any]
) -> subprocess.CompletedProcess[str]:
    """`opencode run` in the project with the printed config plus the local model provider."""
    config = dict(printed)
    config.update(
        {
            "provider": {
                "local": {
                    "npm": "@ai-sdk/openai-compatible",
                    "name": "Local test server",
                    "options": {"baseURL": server.base_url, "apiKey": "sk-local"},
                    "models": {"test-model": {"name": "Test model", "tool_call": True}},
                }
            },
            "model": "local/test-model",
            "small_model": "local/test-model",
            "autoupdate": False,
            "share": "disabled",
        }
    )
    path = tmp_path / "opencode.json"  # outside the project
    path.write_text(json.dumps(config))
    xdg = Path(os.environ.get("SNODO_REAL_HOSTS_HOME") or tmp_path / "xdg")
    env = {
        **os.environ,
        "OPENCODE_CONFIG": str(path),
        "HOME": str(xdg),
        "XDG_CONFIG_HOME": str(xdg / "config"),
        "XDG_DATA_HOME": str(xdg / "data"),
        "XDG_CACHE_HOME": str(xdg / "cache"),
        "XDG_STATE_HOME": str(xdg / "state"),
    }
    assert PREFIX
    return subprocess.run(
        [str(_opencode(Path(PREFIX))), "run", "--print-logs", "do the task"],
        cwd=root,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )


def test_opencode_with_the_printed_config_is_governed(tmp_path: Path) -> None:
    home = tmp_path / "home"
    root = make_project(tmp_path / "repo", PROTOCOL)
    (root / "tests").mkdir()
    (root / "tests" / "test_slow.py").write_text(SLOW_TEST)
    git(root, "add", "-A")
    git(root, "commit", "-qm", "protocol and suite")
    (root / "slow.flag").write_text("")  # untracked: only run_tests here is slow, not the job's copy
    protocol = (root / ".snodo" / "protocol.yml").read_bytes()
    target = str(root / ".snodo" / "protocol.yml")
    script = [
        {"tool_calls": [{"name": "write", "arguments": {"filePath": target, "content": "hacked: true\n"}}]},
        {"tool_calls": [{"name": "edit", "arguments": {"filePath": target, "oldString": "real", "newString": "x"}}]},
        {"tool_calls": [{"name": "bash", "arguments": {"command": f"echo hacked > {target}", "description": "x"}}]},
        {"tool_calls": [{"name": "snodo_write_file", "arguments": {"path": ".snodo/protocol.yml", "content": "x"}}]},
        {"tool_calls": [{"name": "snodo_write_file", "arguments": {"path": "hello.py", "content": "print('hi')\n"}}]},
        {"tool_calls": [{"name": "snodo_run_tests", "arguments": {}}]},
        {"tool_calls": [{"name": "snodo_validate_task", "arguments": {"task_spec": "Add done.txt."}}]},
        {"tool_calls": [{"name": "snodo_dispatch_task", "arguments": {"task_spec": "Add done.txt."}}]},
        {"content": "done"},
    ]
    with ModelServer(script) as server:
        server.untooled = {"content": "snodo task"}
        started = time.monotonic()
        r = _run_opencode(tmp_path, root, server, _printed(root, home))
        took = time.monotonic() - started
    where = f"opencode exit {r.returncode} after {took:.0f} s\n{r.stdout[-2000:]}\n{r.stderr[-4000:]}"
    assert r.returncode == 0, where
    assert (root / ".snodo" / "protocol.yml").read_bytes() == protocol, where
    for tool in ("write", "edit", "bash"):
        assert f"unavailable tool '{tool}'" in r.stdout + r.stderr, where
    assert (root / "hello.py").read_text() == "print('hi')\n"
    assert [e["data"]["tool"] for e in audit(root, "path_refused")] == ["write_file"]
    calls = [e["data"]["tool"] for e in audit(root, "tool_call")]
    assert calls == ["write_file", "write_file", "run_tests", "validate_task", "dispatch_task"], where
    assert not audit(root, "tool_error"), audit(root, "tool_error")  # run_tests outlived opencode's default limit
    assert {e["data"]["status"] for e in audit(root, "validate")} == {"pass"}  # the server's, then the job's
    assert audit(root, "serve_stopped"), "no serve_stopped when opencode closed our input"
    # the job dispatched from inside `opencode run` finishes after opencode has exited
    job_id = audit(root, "dispatch_request")[0]["data"]["job_id"]
    deadline = time.monotonic() + 300
    status: dict[str, Any] = {}
    while time.monotonic() < deadline:
        status = json.loads((root / ".snodo" / "jobs" / job_id / "status.json").read_text())
        if status["status"] in ("completed", "halted"):
            break
        time.sleep(0.5)
    assert status["status"] == "completed", status


@pytest.mark.xfail(
    strict=True,
    reason="opencode 1.18.33 completes the handshake with snodo's failing server but drops the "
    "instructions and the tools/list error: `opencode run` shows nothing and `opencode mcp list` "
    "says only 'Failed to get tools' (measured 2026-12-01)",
)
def test_an_unknown_mode_reaches_the_person_through_opencode(tmp_path: Path) -> None:
    home = tmp_path / "home"
    root = make_project(tmp_path / "repo", PROTOCOL)
    git(root, "add", "-A")
    git(root, "commit", "-qm", "protocol")
    printed = _printed(root, home)
    printed["mcp"]["snodo"]["command"] += ["--mode", "nosuch"]
    with ModelServer([{"content": "done"}]) as server:
        server.untooled = {"content": "snodo task"}
        r = _run_opencode(tmp_path, root, server, printed)
    assert "unknown mode 'nosuch'" in r.stdout + r.stderr, r.stdout[-2000:] + r.stderr[-4000:]
