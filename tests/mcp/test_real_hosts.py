"""snodo inside REAL agent hosts: the opencode CLI (npm ``opencode-ai``) and OpenAI's Codex
CLI (npm ``@openai/codex``), each configured with exactly what ``snodo serve --print-config
HOST`` prints, driven by a scripted model on the local OpenAI-compatible server
(``tests/plugins/model_server.py``: chat completions for opencode, the Responses API for
Codex).

Opt-in: ``tox -e real-hosts`` installs the CLIs with npm and sets ``SNODO_REAL_HOSTS_PREFIX``
(the npm ``--prefix``); without it these tests skip.
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


def _job_completes(root: Path) -> None:
    """The one job dispatched from inside the host finishes after the host has exited."""
    job_id = audit(root, "dispatch_request")[0]["data"]["job_id"]
    deadline = time.monotonic() + 300
    status: dict[str, Any] = {}
    while time.monotonic() < deadline:
        status = json.loads((root / ".git" / "snodo" / "jobs" / job_id / "status.json").read_text())
        if status["status"] in ("completed", "halted"):
            break
        time.sleep(0.5)
    assert status["status"] == "completed", status


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
    _job_completes(root)  # dispatched from inside `opencode run`, finished after opencode exited


def _snodo_tools(body: dict[str, Any]) -> list[str]:
    """The names of snodo's tools a chat-completions request offers the model (opencode's spelling)."""
    names = [t["function"]["name"] for t in body.get("tools", [])]
    return [n for n in names if n.startswith("snodo_")]


def test_an_unknown_mode_reaches_the_person_through_opencode(tmp_path: Path) -> None:
    """opencode drops a server's failed initialize or tool listing (only its logs and `opencode
    mcp list` show it; `opencode run` carries on): a failed snodo lists one tool, `unavailable`,
    so the model reads the error in its instructions and the tool, and calling it prints it."""
    home = tmp_path / "home"
    root = make_project(tmp_path / "repo", PROTOCOL)
    git(root, "add", "-A")
    git(root, "commit", "-qm", "protocol")
    printed = _printed(root, home)
    printed["mcp"]["snodo"]["command"] += ["--mode", "nosuch"]
    script = [{"tool_calls": [{"name": "snodo_unavailable", "arguments": {}}]}, {"content": "done"}]
    with ModelServer(script) as server:
        server.untooled = {"content": "snodo task"}
        r = _run_opencode(tmp_path, root, server, printed)
        tooled = [q["body"] for q in server.requests if q["body"].get("tools")]
    where = r.stdout[-2000:] + r.stderr[-4000:]
    assert tooled and all(_snodo_tools(b) == ["snodo_unavailable"] for b in tooled), where  # no governed tool
    assert "unknown mode 'nosuch'" in json.dumps(tooled[0]["messages"]), "the model was not told"
    shown = [line for line in (r.stdout + r.stderr).splitlines() if "snodo could not start" in line]
    assert shown and "unknown mode 'nosuch'" in shown[0], where  # printed by opencode for the person
    assert not audit(root, "tool_call")


def _codex(prefix: Path) -> Path:
    return prefix / "node_modules" / ".bin" / "codex"


def _codex_home(tmp_path: Path, root: Path, home: Path, server: ModelServer, *extra: str) -> Path:
    """A private ``CODEX_HOME``: the printed profile saved verbatim as ``snodo.config.toml``,
    the base config naming only the local model provider (Responses API, a dummy key from
    the environment, no OpenAI login)."""
    # Not below the system's temporary directory: there Codex refuses to make the helper its
    # own sandbox executes (`bwrap: execvp codex-linux-sandbox`), and its shell never starts.
    codex_home = Path(os.environ.get("SNODO_REAL_HOSTS_HOME") or tmp_path) / f"codex-home-{tmp_path.name}"
    codex_home.mkdir(parents=True, exist_ok=True)
    printed = snodo(root, home, "serve", "--print-config", "codex", *extra, check=True).stdout
    (codex_home / "snodo.config.toml").write_text(printed)
    (codex_home / "config.toml").write_text(
        f"""model = "test-model"
model_provider = "local"

[model_providers.local]
name = "Local test server"
base_url = "{server.base_url}"
wire_api = "responses"
env_key = "SNODO_TEST_MODEL_KEY"
requires_openai_auth = false
"""
    )
    return codex_home


def _run_codex(tmp_path: Path, root: Path, codex_home: Path) -> subprocess.CompletedProcess[str]:
    """`codex exec --profile snodo` in the project, as a person would run it."""
    env = {
        **os.environ,
        "CODEX_HOME": str(codex_home),
        "HOME": str(tmp_path / "codex-user"),
        "SNODO_TEST_MODEL_KEY": "sk-local",
    }
    assert PREFIX
    return subprocess.run(
        [str(_codex(Path(PREFIX))), "exec", "--profile", "snodo", "--skip-git-repo-check", "do the task"],
        cwd=root,
        env=env,
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=600,
    )


def _outputs(server: ModelServer) -> dict[str, str]:
    """What Codex sent back to the model for each call, by call id (from its last request)."""
    items = server.requests[-1]["body"].get("input", [])
    return {i["call_id"]: str(i.get("output")) for i in items if i.get("type", "").endswith("call_output")}


def _snodo_call(name: str, **arguments: Any) -> dict[str, Any]:
    """A call of one of snodo's tools as Codex offers them: the ``mcp__snodo`` namespace."""
    return {"tool_calls": [{"namespace": "mcp__snodo", "name": name, "arguments": arguments}]}


def test_codex_with_the_printed_profile_is_governed(tmp_path: Path) -> None:
    home = tmp_path / "home"
    root = make_project(tmp_path / "repo", PROTOCOL)
    (root / "tests").mkdir()
    (root / "tests" / "test_slow.py").write_text(SLOW_TEST)
    git(root, "add", "-A")
    git(root, "commit", "-qm", "protocol and suite")
    (root / "slow.flag").write_text("")  # untracked: only run_tests here is slow, not the job's copy
    protocol = (root / ".snodo" / "protocol.yml").read_bytes()
    patch = (
        "*** Begin Patch\n*** Update File: .snodo/protocol.yml\n@@\n-protocol_id: real\n+protocol_id: x\n*** End Patch"
    )
    script = [
        {"tool_calls": [{"name": "exec_command", "arguments": {"cmd": "echo hacked > .snodo/protocol.yml"}}]},
        {"tool_calls": [{"name": "exec_command", "arguments": {"cmd": f"apply_patch <<'EOF'\n{patch}\nEOF\n"}}]},
        _snodo_call("write_file", path=".snodo/protocol.yml", content="x"),
        _snodo_call("write_file", path="hello.py", content="print('hi')\n"),
        _snodo_call("run_tests"),
        _snodo_call("validate_task", task_spec="Add done.txt."),
        _snodo_call("dispatch_task", task_spec="Add done.txt."),
        {"content": "done"},
    ]
    with ModelServer(script) as server:
        started = time.monotonic()
        r = _run_codex(tmp_path, root, _codex_home(tmp_path, root, home, server))
        took = time.monotonic() - started
        outputs = _outputs(server)
        offered = [t.get("name") for t in server.requests[0]["body"].get("tools", [])]
    where = f"codex exit {r.returncode} after {took:.0f} s\n{r.stdout[-2000:]}\n{r.stderr[-4000:]}\n{outputs}"
    assert r.returncode == 0, where
    assert "mcp__snodo" in offered, offered  # `required = true`: snodo's tools from the first turn
    assert (root / ".snodo" / "protocol.yml").read_bytes() == protocol, where
    # Codex's own shell and its patch tool are refused by its read-only sandbox
    assert "Read-only file system" in outputs["call_1_0"], where
    assert "read-only sandbox" in outputs["call_2_0"], where
    assert (root / "hello.py").read_text() == "print('hi')\n"
    assert [e["data"]["tool"] for e in audit(root, "path_refused")] == ["write_file"]
    calls = [e["data"]["tool"] for e in audit(root, "tool_call")]
    assert calls == ["write_file", "write_file", "run_tests", "validate_task", "dispatch_task"], where
    # a 65 s run_tests, past Codex's documented 60 s default: the printed tool_timeout_sec covers it
    assert not audit(root, "tool_error"), audit(root, "tool_error")
    assert "1 passed" in outputs["call_5_0"], where
    assert {e["data"]["status"] for e in audit(root, "validate")} == {"pass"}  # the server's, then the job's
    assert audit(root, "serve_stopped"), "no serve_stopped when codex closed our input"
    _job_completes(root)


def test_an_unknown_mode_reaches_the_person_through_codex(tmp_path: Path) -> None:
    home = tmp_path / "home"
    root = make_project(tmp_path / "repo", PROTOCOL)
    git(root, "add", "-A")
    git(root, "commit", "-qm", "protocol")
    with ModelServer([{"content": "done"}]) as server:
        # the profile as printed for a mode that exists, then that mode renamed away in it
        codex_home = _codex_home(tmp_path, root, home, server, "--mode", "producer")
        profile = codex_home / "snodo.config.toml"
        profile.write_text(profile.read_text().replace('"--mode", "producer"', '"--mode", "nosuch"'))
        assert '"nosuch"' in profile.read_text()
        r = _run_codex(tmp_path, root, codex_home)
        asked = len(server.requests)
    # `required = true`: Codex stops before the model is asked anything and prints snodo's message
    assert r.returncode != 0, r.stdout + r.stderr
    assert asked == 0
    assert "unknown mode 'nosuch'" in r.stderr and "producer" in r.stderr and "Fix:" in r.stderr, r.stderr[-4000:]
    assert not audit(root, "tool_call")
