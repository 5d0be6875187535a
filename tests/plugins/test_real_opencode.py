"""The opencode coder against the REAL opencode CLI (npm package ``opencode-ai``), talking to
the local OpenAI-compatible fake model server (``model_server.py``) through an opencode
provider config. Opt-in: ``tox -e real-opencode`` installs the CLI from the npm registry and
sets ``SNODO_REAL_OPENCODE_PREFIX`` (the npm ``--prefix``); without it these tests skip.

The first run lets opencode fetch its OpenAI-compatible provider package from the npm
registry into ``SNODO_REAL_OPENCODE_HOME`` (its cache); no other network is used.
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from hooked import HookedCoder
from model_server import USAGE, ModelServer

from snodo.api import CoderRequest, CoderResult, EnvironmentProblem
from snodo.plugin.host import PluginHost

PREFIX = os.environ.get("SNODO_REAL_OPENCODE_PREFIX")
pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(not PREFIX, reason="opt-in: tox -e real-opencode (needs the opencode-ai npm package)"),
]


def _binary(prefix: Path) -> Path:
    modules = prefix / "node_modules"
    candidates = [modules / ".bin" / "opencode", *sorted(modules.glob("opencode-*/bin/opencode"))]
    candidates.append(modules / "opencode-ai" / "bin" / "opencode.exe")
    for candidate in candidates:
        if candidate.is_file() and os.access(candidate, os.X_OK):
            return candidate
    pytest.fail(f"no opencode executable under {modules}")


@pytest.fixture
def real_opencode(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[ModelServer]:
    assert PREFIX
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "opencode").symlink_to(_binary(Path(PREFIX)))
    monkeypatch.setenv("PATH", f"{bin_dir}:{os.environ['PATH']}")
    home = Path(os.environ.get("SNODO_REAL_OPENCODE_HOME") or tmp_path / "home")
    for var, sub in (
        ("HOME", ""),
        ("XDG_CONFIG_HOME", ".config"),
        ("XDG_DATA_HOME", ".local/share"),
        ("XDG_CACHE_HOME", ".cache"),
        ("XDG_STATE_HOME", ".local/state"),
    ):
        (home / sub).mkdir(parents=True, exist_ok=True)
        monkeypatch.setenv(var, str(home / sub))
    with ModelServer() as server:
        server.untooled = {"content": "snodo task"}  # opencode's session-title request
        config = {
            "$schema": "https://opencode.ai/config.json",
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
        # the user's global configuration, where opencode looks for it: outside the workspace
        # (not part of the change set), and carried into a confined run's private HOME
        path = home / ".config" / "opencode" / "opencode.json"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(config))
        monkeypatch.setenv("PWD", str(tmp_path))  # a coder that forgot $PWD would work here
        yield server


def run(host: PluginHost, workspace: Path, log: list[str]) -> CoderResult:
    coder = HookedCoder(host, "opencode", {"model": "local/test-model", "timeout": 240, "max_requests": 10})
    request = CoderRequest(
        task_id="t1", spec="add hello.py", workspace=workspace, mode_id="dev", log=log.append, timeout=240
    )
    return coder.generate(request)


def write(path: str, content: str) -> dict[str, Any]:
    return {"tool_calls": [{"name": "write", "arguments": {"filePath": path, "content": content}}]}


def test_a_task_edits_the_workspace_named_by_dir_and_pwd(
    host: PluginHost, project: Any, real_opencode: ModelServer, tmp_path: Path
) -> None:
    real_opencode.script = [write("hello.py", "def hello():\n    return 'hi'\n"), {"content": "Added hello.py."}]
    root = project({"README.md": "# demo\n"}, git=True)
    log: list[str] = []
    result = run(host, root, log)
    print("\n".join(["--- job log", *log, "--- summary", result.summary, "--- usage", json.dumps(result.usage)]))
    assert (root / "hello.py").read_text() == "def hello():\n    return 'hi'\n"
    assert not (tmp_path / "hello.py").exists()
    assert result.summary.startswith("Added hello.py.")
    assert result.usage["requests"] >= 2 and result.usage["prompt_tokens"] > 0
    assert any(line.startswith("tool write") for line in log)
    assert not any("\x1b" in line for line in log)


def test_a_permission_rejection_is_an_environment_problem(
    host: PluginHost, project: Any, real_opencode: ModelServer, tmp_path: Path
) -> None:
    outside = tmp_path / "outside" / "x.py"
    real_opencode.script = [write(str(outside), "x = 1\n"), {"content": "could not write"}]
    root = project({"README.md": "# demo\n"}, git=True)
    with pytest.raises(EnvironmentProblem, match="rejected by its permission rules") as caught:
        run(host, root, [])
    print(caught.value)
    assert not outside.exists() and "\x1b" not in str(caught.value)


def test_a_provider_error_carries_the_providers_message(
    host: PluginHost, project: Any, real_opencode: ModelServer
) -> None:
    body = {"error": {"message": "Incorrect API key provided", "type": "invalid_request_error"}}
    real_opencode.script = [{"status": 401, "body": body}]
    # the first failed request's log line ends the run: its message is the provider's; the
    # JSON error event that would add "(HTTP 401)" comes after it, from a process already stopped
    with pytest.raises(EnvironmentProblem, match=r"provider error: .*Incorrect API key provided") as caught:
        run(host, project({"README.md": "# demo\n"}, git=True), [])
    print(caught.value)
    assert len([r for r in real_opencode.requests if r["body"].get("tools")]) == 1


def test_a_garbage_reply_loop_is_stopped_by_the_stall_detector(
    host: PluginHost, project: Any, real_opencode: ModelServer
) -> None:
    real_opencode.script = [{"raw": "<html>not a completion</html>"}]
    with pytest.raises(EnvironmentProblem, match="model requests produced nothing") as caught:
        run(host, project({"README.md": "# demo\n"}, git=True), [])
    print(caught.value, f"({len(real_opencode.requests)} requests reached the server)")
    assert len(real_opencode.requests) < 20


def test_a_task_runs_confined_with_the_network_the_coder_declares(
    host: PluginHost, project: Any, real_opencode: ModelServer, tmp_path: Path
) -> None:
    """The engine runs opencode inside the sandbox (network allowed: it declares needs_network);
    the real CLI must still do its work there, writing only its workspace."""
    from snodo.sandbox import SandboxPolicy, confined

    real_opencode.script = [write("hello.py", "def hello():\n    return 'hi'\n"), {"content": "Added hello.py."}]
    root = project({"README.md": "# demo\n"}, git=True)
    log: list[str] = []
    with confined(SandboxPolicy(workspace=root, network=True)):
        result = run(host, root, log)
    print("\n".join(["--- job log", *log, "--- summary", result.summary]))
    assert (root / "hello.py").read_text() == "def hello():\n    return 'hi'\n"


def test_a_429_storm_ends_at_the_first_failed_request_within_the_timeout(
    host: PluginHost, project: Any, real_opencode: ModelServer
) -> None:
    """The CLI retries a 429 five times over ~90 s with no JSON event; its ERROR log line ends it."""
    real_opencode.script = [{"status": 429, "body": {"error": {"message": "slow down", "type": "rate_limit"}}}]
    coder = HookedCoder(host, "opencode", {"model": "local/test-model", "timeout": 120, "max_requests": 10})
    request = CoderRequest(task_id="t1", spec="add hello.py", workspace=project({"a": "1\n"}, git=True), mode_id="dev")
    started = time.monotonic()
    with pytest.raises(EnvironmentProblem, match=r"provider error: AI_APICallError: slow down") as caught:
        coder.generate(request)
    elapsed = time.monotonic() - started
    tooled = [r for r in real_opencode.requests if r["body"].get("tools")]
    print(caught.value, f"({elapsed:.1f}s, {len(tooled)} model request(s))")
    assert len(tooled) == 1  # stopped at the first failed request: no silent retries
    assert elapsed < 120 and "opencode models" in str(caught.value)


def test_usage_is_read_from_the_events_even_when_the_run_is_stopped(
    host: PluginHost, project: Any, real_opencode: ModelServer
) -> None:
    real_opencode.script = [write("a.py", "a = 1\n"), write("b.py", "b = 2\n"), {"content": "done"}]
    coder = HookedCoder(host, "opencode", {"model": "local/test-model", "timeout": 240, "max_requests": 1})
    request = CoderRequest(task_id="t1", spec="add a.py", workspace=project({"r": "1\n"}, git=True), mode_id="dev")
    with pytest.raises(EnvironmentProblem, match=r"max_requests") as caught:
        coder.generate(request)
    spent = caught.value.usage  # type: ignore[attr-defined]
    print(json.dumps(spent))
    assert spent["requests"] == 2 and spent["prompt_tokens"] >= USAGE["prompt_tokens"]
    assert spent["completion_tokens"] >= USAGE["completion_tokens"]
