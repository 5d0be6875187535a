"""The opencode coder against a fake ``opencode`` first on PATH that behaves like the real CLI
where it matters (``tests/conformance/fake_opencode.py``): it works in ``--dir``/``$PWD``,
prints the real ``--format json`` events, exits 0 after auto-rejecting a permission, retries
provider errors on its own. ``OPENCODE_FAKE`` picks its behaviour."""

from __future__ import annotations

import importlib.util
import json
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from hooked import HookedCoder
from snodo_plugins.coders.opencode import OpencodeCoder

from snodo.api import CoderRequest, CoderResult, EnvironmentProblem
from snodo.plugin.host import PluginHost

_spec = importlib.util.spec_from_file_location(
    "fake_opencode", Path(__file__).resolve().parents[1] / "conformance" / "fake_opencode.py"
)
assert _spec is not None and _spec.loader is not None
fake = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(fake)


@pytest.fixture
def fake_opencode(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Callable[[str], Path]:
    """Install the fake first on PATH; returns a setter for its behaviour giving the record file."""
    fake.install(tmp_path / "bin")
    monkeypatch.setenv("PATH", f"{tmp_path / 'bin'}:/usr/bin:/bin")
    record = tmp_path / "record.json"
    monkeypatch.setenv("OPENCODE_FAKE_RECORD", str(record))
    monkeypatch.setenv("OPENCODE_FAKE_PIDS", str(tmp_path / "pids"))
    # The test process's own directory: a coder that forgot $PWD would make the fake edit here.
    monkeypatch.setenv("PWD", str(tmp_path))

    def behave(behaviour: str) -> Path:
        monkeypatch.setenv("OPENCODE_FAKE", behaviour)
        return record

    return behave


def run(host: PluginHost, workspace: Path, config: dict[str, Any], log: list[str] | None = None) -> CoderResult:
    coder = HookedCoder(host, "opencode", config)
    request = CoderRequest(
        task_id="t1",
        spec="add a greeting module",
        workspace=workspace,
        mode_id="dev",
        protected_paths=("secrets/**",),
        findings=("tests failed",),
        attempt=1,
        log=(log.append if log is not None else lambda _line: None),
        timeout=30,
    )
    return coder.generate(request)


def test_good_run_edits_the_workspace_and_reads_the_events(
    host: PluginHost, project: Callable[..., Path], fake_opencode: Callable[[str], Path], tmp_path: Path
) -> None:
    record = fake_opencode("good")
    root = project({"README.md": "# demo\n"})
    log: list[str] = []
    result = run(host, root, {"model": "anthropic/claude", "extra_args": ["--agent", "build"]}, log)
    assert result.operations == ()
    assert (root / "greeting.py").read_text().startswith("def greet")
    assert not (tmp_path / "greeting.py").exists()
    seen = json.loads(record.read_text())
    assert Path(seen["pwd"]).resolve() == root.resolve()
    argv = seen["argv"]
    assert argv[:9] == [
        "run",
        "--format",
        "json",
        "--print-logs",
        "--log-level",
        "ERROR",
        "--dir",
        str(root.resolve()),
        "--model",
    ]
    assert argv[9:12] == ["anthropic/claude", "--agent", "build"]
    prompt = argv[12]
    assert "add a greeting module" in prompt and "tests failed" in prompt
    assert ".snodo/" in prompt and "secrets/**" in prompt
    assert result.summary.splitlines()[0] == "Added greeting.py and tests/test_greeting.py."
    assert "edited: greeting.py, test_greeting.py" in result.summary
    assert result.usage["requests"] == 2 and result.usage["prompt_tokens"] == 22
    assert result.usage["completion_tokens"] == 14 and result.usage["tool_calls"] == 2
    assert result.usage["cost_usd"] == pytest.approx(0.0002)
    assert "tool write greeting.py: completed" in log
    assert not any(line.startswith("{") for line in log)  # events are read, not dumped raw


def test_pwd_alone_decides_where_the_cli_works(
    host: PluginHost,
    project: Callable[..., Path],
    fake_opencode: Callable[[str], Path],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Even a CLI that ignored --dir would land in the workspace: $PWD names it too."""
    record = fake_opencode("good")
    root = project({})
    coder = HookedCoder(host, "opencode", {})
    monkeypatch.setattr(OpencodeCoder, "argv", lambda self, request: ["opencode", "run", "--format", "json", "go"])
    coder.generate(CoderRequest(task_id="t", spec="s", workspace=root, mode_id="dev", timeout=30))
    assert (root / "greeting.py").is_file()
    assert Path(json.loads(record.read_text())["pwd"]).resolve() == root.resolve()


def test_terminal_control_sequences_are_stripped(
    host: PluginHost, project: Callable[..., Path], fake_opencode: Callable[[str], Path]
) -> None:
    fake_opencode("ansi")
    log: list[str] = []
    result = run(host, project({}), {}, log)
    assert "! loading models" in log
    assert not any("\x1b" in line for line in log) and "\x1b" not in result.summary


def test_permission_rejection_is_an_environment_problem_not_no_change(
    host: PluginHost, project: Callable[..., Path], fake_opencode: Callable[[str], Path]
) -> None:
    fake_opencode("reject")
    with pytest.raises(EnvironmentProblem) as caught:
        run(host, project({}), {})
    assert "rejected by its permission rules: write /elsewhere/outside.py" in caught.value.message
    assert "opencode.json" in str(caught.value) and "\x1b" not in str(caught.value)


def test_unretryable_provider_error_carries_the_providers_message(
    host: PluginHost, project: Callable[..., Path], fake_opencode: Callable[[str], Path]
) -> None:
    fake_opencode("error401")
    with pytest.raises(EnvironmentProblem, match=r"provider error: Incorrect API key provided \(HTTP 401\)"):
        run(host, project({}), {})


def test_retryable_provider_error_stops_the_cli_at_once(
    host: PluginHost, project: Callable[..., Path], fake_opencode: Callable[[str], Path]
) -> None:
    fake_opencode("error500")
    started = time.monotonic()
    with pytest.raises(EnvironmentProblem, match=r"provider error: upstream connect error \(HTTP 500\)"):
        run(host, project({}), {"timeout": 25})
    assert time.monotonic() - started < 15  # not the 25 s timeout: the error event ends the run


def test_a_silent_429_storm_ends_at_the_first_logged_provider_error(
    host: PluginHost, project: Callable[..., Path], fake_opencode: Callable[[str], Path]
) -> None:
    fake_opencode("storm")
    started = time.monotonic()
    with pytest.raises(EnvironmentProblem, match=r"provider error: AI_APICallError: error 429") as caught:
        run(host, project({}), {"timeout": 25, "model": "local/test-model"})
    assert time.monotonic() - started < 15  # not the 25 s timeout, nor the CLI's ~90 s of retries
    assert "opencode models" in str(caught.value) and "'local/test-model'" in str(caught.value)


def test_a_run_stopped_at_max_requests_carries_its_usage(
    host: PluginHost, project: Callable[..., Path], fake_opencode: Callable[[str], Path]
) -> None:
    fake_opencode("good")  # two model requests, the first of 11 + 7 tokens
    with pytest.raises(EnvironmentProblem, match=r"max_requests") as caught:
        run(host, project({}), {"max_requests": 1})
    spent = caught.value.usage  # type: ignore[attr-defined]
    # every step_finish read before the kill is counted (the fake may get its second one out)
    assert spent["requests"] == 2 and spent["prompt_tokens"] in (11, 22) and spent["completion_tokens"] in (7, 14)
    assert spent["model"] == "(opencode default)" and spent["seconds"] > 0


def test_a_loop_of_empty_replies_is_stopped(
    host: PluginHost, project: Callable[..., Path], fake_opencode: Callable[[str], Path]
) -> None:
    fake_opencode("loop")
    started = time.monotonic()
    with pytest.raises(EnvironmentProblem, match=r"last 3 model requests produced nothing"):
        run(host, project({}), {"timeout": 25})
    assert time.monotonic() - started < 15


def test_model_requests_are_bounded(
    host: PluginHost, project: Callable[..., Path], fake_opencode: Callable[[str], Path]
) -> None:
    fake_opencode("good")  # two model requests
    with pytest.raises(EnvironmentProblem, match=r"more than 1 model requests \(max_requests\)"):
        run(host, project({}), {"max_requests": 1})


def test_missing_binary_names_the_install_hint(
    host: PluginHost, project: Callable[..., Path], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    empty = tmp_path / "empty-bin"
    empty.mkdir()
    monkeypatch.setenv("PATH", str(empty))
    with pytest.raises(EnvironmentProblem) as caught:
        run(host, project({}), {})
    assert "npm install -g opencode-ai" in str(caught.value)
    assert "opencode" in caught.value.message


def test_timeout_kills_the_whole_process_group(
    host: PluginHost,
    project: Callable[..., Path],
    tmp_path: Path,
    fake_opencode: Callable[[str], Path],
    is_alive: Callable[[int], bool],
) -> None:
    fake_opencode("hang")
    started = time.monotonic()
    with pytest.raises(EnvironmentProblem, match=r"timed out after 1\.5s"):
        run(host, project({}), {"timeout": 1.5})
    assert time.monotonic() - started < 10
    pids = [int(p) for p in (tmp_path / "pids").read_text().split()]
    deadline = time.monotonic() + 5
    while any(is_alive(p) for p in pids) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not [p for p in pids if is_alive(p)], "the fake or the child it spawned survived the timeout"


def test_silence_timeout(host: PluginHost, project: Callable[..., Path], fake_opencode: Callable[[str], Path]) -> None:
    fake_opencode("silent")
    with pytest.raises(EnvironmentProblem, match=r"timed out after 0.5s without output"):
        run(host, project({}), {"silence_timeout": 0.5})


def test_crash_reports_exit_code_and_output_tail(
    host: PluginHost, project: Callable[..., Path], fake_opencode: Callable[[str], Path]
) -> None:
    fake_opencode("crash")
    with pytest.raises(EnvironmentProblem) as caught:
        run(host, project({}), {})
    assert "exited with code 3" in caught.value.message
    assert "the runtime could not start" in caught.value.message


def test_touching_snodo_is_not_hidden(
    host: PluginHost, project: Callable[..., Path], fake_opencode: Callable[[str], Path]
) -> None:
    fake_opencode("snodo")
    root = project({".snodo/protocol.yml": "protocol_id: real\n"})
    result = run(host, root, {})
    assert (root / ".snodo/protocol.yml").read_text() == "protocol_id: hijacked\n"
    assert "adjusted the protocol" in result.summary
    assert "edited: protocol.yml" in result.summary
