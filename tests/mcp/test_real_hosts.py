"""snodo inside REAL agent hosts: the opencode CLI (npm ``opencode-ai``), OpenAI's Codex CLI
(npm ``@openai/codex``) and Anthropic's Claude Code (npm ``@anthropic-ai/claude-code``), each
configured with exactly what ``snodo serve --print-config HOST`` prints, driven by a scripted
model on the local server (``tests/plugins/model_server.py``: chat completions for opencode,
the Responses API for Codex, the Messages API for Claude Code; no login anywhere).

Besides the governed session of each host, the frictions these hosts showed: a job
dispatched after a confined ``run_tests`` outlives the host (every governed session test),
a dispatch under a drifted protocol is refused before its token, and a host quitting during
``run_tests`` leaves the cancellation in the audit log.

Opt-in: ``tox -e real-hosts`` installs the CLIs with npm and sets ``SNODO_REAL_HOSTS_PREFIX``
(the npm ``--prefix``); without it these tests skip.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
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


class JobParent:
    """Run before the model's last turn, while the host and snodo still run: the dispatched
    job's parent. It must not be a ``snodo serve`` (after a confined ``run_tests`` the server
    was the child subreaper, and the job one of its children: a host that kills the server's
    process tree would kill it)."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.seen: list[tuple[int, int, list[int]]] = []

    def __call__(self) -> None:
        for status in self.root.glob(".git/snodo/jobs/job-*/status.json"):
            pid = json.loads(status.read_text()).get("pid")
            with contextlib.suppress(OSError, ValueError):
                ppid = int(Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[1])
                self.seen.append((int(pid), ppid, _servers(self.root)))

    def check(self) -> None:
        assert self.seen, "no live job was seen before the last turn"
        for pid, ppid, servers in self.seen:
            assert servers and ppid not in servers, f"job {pid} is a child of snodo serve {ppid}"


def _servers(root: Path) -> list[int]:
    """The ``snodo serve`` processes serving ``root``."""
    found = []
    for name in os.listdir("/proc"):
        with contextlib.suppress(OSError):
            argv = Path(f"/proc/{name}/cmdline").read_bytes().split(b"\0") if name.isdigit() else []
            if b"serve" in argv and any(str(root).encode() in a for a in argv):
                found.append(int(name))
    return found


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
    env, argv = _opencode_command(tmp_path, server, printed)
    return subprocess.run(argv, cwd=root, env=env, capture_output=True, text=True, timeout=600)


def _opencode_command(tmp_path: Path, server: ModelServer, printed: dict[str, Any]) -> tuple[dict[str, str], list[str]]:
    """The environment and command line of `opencode run` with the printed config plus the
    local model provider."""
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
    return env, [str(_opencode(Path(PREFIX))), "run", "--print-logs", "do the task"]


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
        {"content": "done", "before": (parent := JobParent(root))},
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
    parent.check()
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
        {"content": "done", "before": (parent := JobParent(root))},
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
    parent.check()
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


# --------------------------------------------------------------------- issue #43's frictions


def test_a_dispatch_under_a_drifted_protocol_is_refused_in_opencode(tmp_path: Path) -> None:
    """A person's editor changes ``.snodo/protocol.yml`` between the validation and the
    dispatch: the dispatch is refused, no job is left behind, and the token stays unused."""
    home = tmp_path / "home"
    root = make_project(tmp_path / "repo", PROTOCOL)
    git(root, "add", "-A")
    git(root, "commit", "-qm", "protocol")
    protocol = root / ".snodo" / "protocol.yml"
    committed = protocol.read_text()

    def drift() -> None:
        protocol.write_text(committed + "# edited outside snodo\n")

    script = [
        {"tool_calls": [{"name": "snodo_validate_task", "arguments": {"task_spec": "Add done.txt."}}]},
        {"tool_calls": [{"name": "snodo_dispatch_task", "arguments": {"task_spec": "Add done.txt."}}], "before": drift},
        {"content": "done"},
    ]
    with ModelServer(script) as server:
        server.untooled = {"content": "snodo task"}
        r = _run_opencode(tmp_path, root, server, _printed(root, home))
        said = json.dumps([q["body"].get("messages") for q in server.requests])
    where = f"opencode exit {r.returncode}\n{r.stdout[-2000:]}\n{r.stderr[-3000:]}"
    assert r.returncode == 0, where
    assert "not the one in force" in said and "no token was issued or used" in said, where
    assert [e["data"]["tool"] for e in audit(root, "tool_call")] == ["validate_task", "dispatch_task"]
    assert not audit(root, "dispatch_request") and not audit(root, "token_consumed")
    assert not list(root.glob(".git/snodo/jobs/job-*")), "a job was left behind"


#: The cancelled suite: a child marked on its command line, so the test finds it in /proc
#: whatever PID namespace the sandbox gave it.
CANCELLED_TEST = """\
import subprocess, sys, time
from pathlib import Path

def test_slow():
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(300)", "{marker}"])
    (Path(__file__).parent.parent / "started.flag").write_text(str(child.pid))
    time.sleep(300)
"""


def _marked(marker: str) -> list[int]:
    found = []
    for name in os.listdir("/proc"):
        with contextlib.suppress(OSError):
            if name.isdigit() and marker.encode() in Path(f"/proc/{name}/cmdline").read_bytes():
                found.append(int(name))
    return found


@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGKILL])
def test_opencode_quitting_during_run_tests_leaves_the_cancellation_in_the_audit(
    tmp_path: Path, signum: signal.Signals
) -> None:
    home = tmp_path / "home"
    root = make_project(tmp_path / "repo", PROTOCOL)
    marker = f"snodo-cancel-{tmp_path.name}"
    (root / "tests").mkdir()
    (root / "tests" / "test_slow.py").write_text(CANCELLED_TEST.replace("{marker}", marker))
    git(root, "add", "-A")
    git(root, "commit", "-qm", "protocol and a slow suite")
    script = [{"tool_calls": [{"name": "snodo_run_tests", "arguments": {}}]}, {"content": "done"}]
    with ModelServer(script) as server:
        server.untooled = {"content": "snodo task"}
        proc = _start_opencode(tmp_path, root, server, _printed(root, home))
        try:
            deadline = time.monotonic() + 120
            while not (root / "started.flag").exists() and time.monotonic() < deadline and proc.poll() is None:
                time.sleep(0.1)
            assert (root / "started.flag").exists(), "run_tests never started"
            assert _marked(marker), "the suite's child is not running"
            # a person's Ctrl-C goes to the terminal's whole foreground process group: opencode
            # and the servers it started, snodo included; or the host killed outright (snodo
            # sees only the end of its input). (opencode waits for the call to end on SIGTERM.)
            if signum == signal.SIGINT:
                os.killpg(proc.pid, signum)
            else:
                proc.send_signal(signum)
            out, err = proc.communicate(timeout=60)
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.communicate()
    where = f"opencode exit {proc.returncode}\n{out[-2000:]}\n{err[-3000:]}"
    deadline = time.monotonic() + 30
    while (_marked(marker) or not audit(root, "serve_stopped")) and time.monotonic() < deadline:
        time.sleep(0.2)
    assert not _marked(marker), f"a process of the cancelled run_tests outlived the host\n{where}"
    cancelled = audit(root, "tool_cancelled")
    assert [e["data"]["tool"] for e in cancelled] == ["run_tests"], where
    events = [e["event"] for e in audit(root) if e["event"] in ("tool_cancelled", "serve_stopped")]
    assert events[:2] == ["tool_cancelled", "serve_stopped"], (events, where)


def _start_opencode(tmp_path: Path, root: Path, server: ModelServer, printed: dict[str, Any]) -> subprocess.Popen[str]:
    """`opencode run` started, not waited for (as :func:`_run_opencode` configures it)."""
    env, argv = _opencode_command(tmp_path, server, printed)
    return subprocess.Popen(  # its own process group, as a terminal's foreground job
        argv,
        cwd=root,
        env=env,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )


# ------------------------------------------------------------------------------ Claude Code


def _claude(prefix: Path) -> Path:
    return prefix / "node_modules" / ".bin" / "claude"


def _run_claude(tmp_path: Path, root: Path, server: ModelServer, config: Path) -> subprocess.CompletedProcess[str]:
    """`claude -p` started the way docs/mcp-hosts.md says: the printed file as its MCP config
    and its settings; Anthropic's Messages API from the scripted server, a dummy key, no login."""
    user = tmp_path / "claude-user"
    user.mkdir(exist_ok=True)
    env = {
        **os.environ,
        "HOME": str(user),
        "XDG_CONFIG_HOME": str(user / ".config"),
        "ANTHROPIC_BASE_URL": server.base_url.removesuffix("/v1"),
        "ANTHROPIC_API_KEY": "sk-local",
        "DISABLE_AUTOUPDATER": "1",
        "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1",
    }
    assert PREFIX
    argv = [str(_claude(Path(PREFIX))), "-p", "do the task", "--mcp-config", str(config), "--strict-mcp-config"]
    argv += ["--settings", str(config), "--output-format", "json", "--model", "claude-sonnet-4-5"]
    return subprocess.run(
        argv, cwd=root, env=env, stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=600
    )


def _tool_results(server: ModelServer) -> dict[str, str]:
    """What Claude Code sent back to the model for each tool_use, by id (from its last request)."""
    found = {}
    for message in server.requests[-1]["body"].get("messages", []):
        for block in message.get("content") if isinstance(message.get("content"), list) else ():
            if block.get("type") == "tool_result":
                found[block["tool_use_id"]] = json.dumps(block.get("content"))
    return found


def test_claude_code_with_the_printed_config_is_governed(tmp_path: Path) -> None:
    home = tmp_path / "home"
    root = make_project(tmp_path / "repo", PROTOCOL)
    (root / "tests").mkdir()
    (root / "tests" / "test_slow.py").write_text(SLOW_TEST)
    git(root, "add", "-A")
    git(root, "commit", "-qm", "protocol and suite")
    (root / "slow.flag").write_text("")  # untracked: only run_tests here is slow, not the job's copy
    protocol = (root / ".snodo" / "protocol.yml").read_bytes()
    target = str(root / ".snodo" / "protocol.yml")
    config = tmp_path / "snodo.claude.json"  # outside the project
    config.write_text(snodo(root, home, "serve", "--print-config", "claude-code", check=True).stdout)

    def snodo_call(name: str, **arguments: Any) -> dict[str, Any]:
        return {"tool_calls": [{"name": f"mcp__snodo__{name}", "arguments": arguments}]}

    script = [
        {"tool_calls": [{"name": "Write", "arguments": {"file_path": target, "content": "hacked: true\n"}}]},
        {"tool_calls": [{"name": "Edit", "arguments": {"file_path": target, "old_string": "real", "new_string": "x"}}]},
        {"tool_calls": [{"name": "Bash", "arguments": {"command": f"echo hacked > {target}"}}]},
        snodo_call("write_file", path=".snodo/protocol.yml", content="x"),
        snodo_call("write_file", path="hello.py", content="print('hi')\n"),
        snodo_call("run_tests"),
        snodo_call("validate_task", task_spec="Add done.txt."),
        snodo_call("dispatch_task", task_spec="Add done.txt."),
        {"content": "done", "before": (parent := JobParent(root))},
    ]
    with ModelServer(script) as server:
        started = time.monotonic()
        r = _run_claude(tmp_path, root, server, config)
        took = time.monotonic() - started
        results = _tool_results(server)
        first = [t.get("name") for t in server.requests[0]["body"].get("tools", [])]
    where = f"claude exit {r.returncode} after {took:.0f} s\n{r.stdout[-2000:]}\n{r.stderr[-3000:]}\n{results}"
    assert r.returncode == 0, where
    assert "mcp__snodo__dispatch_task" in first, first  # the first turn waited for snodo
    assert not {"Write", "Edit", "NotebookEdit", "Bash"} & set(first), first
    assert (root / ".snodo" / "protocol.yml").read_bytes() == protocol, where
    for n in (1, 2, 3):  # Claude Code's own writers and shell: denied by the printed settings
        assert "not enabled" in results[f"toolu_{n}_0"], where
    assert (root / "hello.py").read_text() == "print('hi')\n"
    assert [e["data"]["tool"] for e in audit(root, "path_refused")] == ["write_file"]
    calls = [e["data"]["tool"] for e in audit(root, "tool_call")]
    assert calls == ["write_file", "write_file", "run_tests", "validate_task", "dispatch_task"], where
    assert not audit(root, "tool_error"), audit(root, "tool_error")  # a 65 s run_tests within MCP_TOOL_TIMEOUT
    assert "1 passed" in results["toolu_6_0"], where
    assert audit(root, "serve_stopped"), "no serve_stopped when claude closed our input"
    parent.check()
    _job_completes(root)  # dispatched after a confined run_tests, finished after claude exited
