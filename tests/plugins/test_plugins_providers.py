"""Real providers through the whole engine, over real HTTP (litellm -> openai SDK -> the local
OpenAI-compatible ``model_server.py``): judges pointed at their own ``api_base`` judge a run
and record usage; a halted run keeps the tokens of every request made; a missing judge key
or a dead endpoint halts before the coder's first request; a slow stream is cut at its
wall-clock deadline; failures are named for what they are."""

from __future__ import annotations

import json
import socket
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from hooked import HookedCoder
from model_server import USAGE, ModelServer
from snodo_plugins import _model
from snodo_plugins._model_settings import ModelSettings

from snodo.api import CoderRequest, EnvironmentProblem
from snodo.engine.loop import Engine
from snodo.engine.results import RunResult
from snodo.governance.service import Project
from snodo.plugin.host import PluginHost
from snodo.protocol import load_protocol

TOOL_MODEL = "openai/gpt-4o-mini"  # litellm knows it takes tools, and its price
JUDGE_MODEL = "hosted_vllm/judge"
KEY = "SNODO_TEST_MODEL_KEY"
PASS = {"content": '{"severity": "pass", "justification": "fits"}'}
SUBMIT = {
    "tool_calls": [
        {
            "name": "submit_files",
            "arguments": {"files": [{"op": "write", "path": "greet.py", "content": "def greet():\n    return 'hi'\n"}]},
        }
    ]
}
READ = {"tool_calls": [{"name": "read_file", "arguments": {"path": "README.md"}}]}


@pytest.fixture
def server(monkeypatch: pytest.MonkeyPatch) -> Iterator[ModelServer]:
    monkeypatch.setenv(KEY, "sk-test")
    with ModelServer() as running:
        running.untooled = PASS  # the judges offer no tools: every judge request gets a verdict
        yield running


def closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def run(git_repo: Path, host: PluginHost, coder: dict[str, Any], validators: list[dict[str, Any]]) -> RunResult:
    # WF3: both phases judged; the model-free fillers make no request
    if not any(v.get("evaluation_phase", "pre_execute") == "pre_execute" for v in validators):
        validators = [*validators, {"validator_id": "scope", "validator_type": "protocol"}]
    if not any(v.get("evaluation_phase") == "post_execute" for v in validators):
        validators = [
            *validators,
            {"validator_id": "met", "validator_type": "acceptance", "evaluation_phase": "post_execute"},
        ]
    mode = {
        "mode_id": "producer",
        "tools": ["read", "edit", "validate", "dispatch"],
        "validators": [v["validator_id"] for v in validators],
        "coder": "litellm",
        "coder_config": coder,
    }
    protocol = {"protocol_id": "t", "name": "t", "modes": [mode], "validators": validators}
    (git_repo / ".snodo").mkdir(exist_ok=True)
    (git_repo / ".snodo" / "protocol.yml").write_text(json.dumps(protocol))  # JSON is YAML
    loaded = load_protocol(git_repo / ".snodo" / "protocol.yml", host)
    return Engine(Project(loaded, host)).run("add a greet module")


def audit(git_repo: Path, event: str) -> list[dict[str, Any]]:
    lines = (git_repo / ".snodo" / "audit.log").read_text().splitlines()
    return [r["data"] for r in map(json.loads, lines) if r["event"] == event]


def coder_config(server: ModelServer, **extra: Any) -> dict[str, Any]:
    return {"model": TOOL_MODEL, "api_base": server.base_url, "api_key_env": KEY, "max_retries": 0, **extra}


def judge(vid: str, vtype: str, phase: str, base: str, **tooling: Any) -> dict[str, Any]:
    return {
        "validator_id": vid,
        "validator_type": vtype,
        "evaluation_phase": phase,
        "model": JUDGE_MODEL,
        "criteria": ["the greeting is friendly"],
        "tooling": {"api_base": base, "api_key_env": KEY, "max_retries": 0, **tooling},
    }


def test_acceptance_and_protocol_judges_reach_their_api_base_and_record_usage(
    git_repo: Path, host: PluginHost, server: ModelServer
) -> None:
    server.script = [SUBMIT]
    validators = [
        judge("fit", "protocol", "pre_execute", server.base_url),
        judge("done", "acceptance", "post_execute", server.base_url, temperature=0),
    ]
    result = run(git_repo, host, coder_config(server), validators)
    assert result.status == "completed", result.message
    judged = [r["body"] for r in server.requests if not r["body"].get("tools")]
    assert [b["model"] for b in judged] == ["judge", "judge"]  # both judges called the server
    assert judged[1]["temperature"] == 0
    by_judge = {u["validator"]: u for u in result.payload()["usage"] if "validator" in u}
    assert set(by_judge) == {"fit", "done"}
    for spent in by_judge.values():
        assert spent["model"] == JUDGE_MODEL and spent["requests"] == 1
        assert spent["prompt_tokens"] == USAGE["prompt_tokens"]
    events = audit(git_repo, "judge_usage")
    assert {(e["validator"], e["phase"]) for e in events} == {("fit", "pre_execute"), ("done", "post_execute")}
    assert audit(git_repo, "coder_usage")[0]["prompt_tokens"] == USAGE["prompt_tokens"]


def test_a_500_after_a_tool_turn_keeps_the_tokens_of_every_request(
    git_repo: Path, host: PluginHost, server: ModelServer
) -> None:
    server.script = [READ, {"status": 500}]
    result = run(git_repo, host, coder_config(server), [])
    assert (result.status, result.outcome) == ("halted", "environment_error")
    (spent,) = result.payload()["usage"]
    assert spent["requests"] == 2 and spent["turns"] == 1
    assert spent["prompt_tokens"] == USAGE["prompt_tokens"]  # the 500 reported none
    assert spent["cost_usd"] > 0
    (audited,) = audit(git_repo, "coder_usage")
    assert audited["requests"] == 2 and audited["prompt_tokens"] == USAGE["prompt_tokens"]


def test_a_timed_out_run_keeps_the_tokens_of_every_request(
    git_repo: Path, host: PluginHost, server: ModelServer
) -> None:
    server.script = [READ, {"hang": 30}]
    started = time.monotonic()
    result = run(git_repo, host, coder_config(server, timeout=3), [])
    assert (result.status, result.outcome) == ("halted", "environment_error")
    assert "did not answer within" in result.message
    assert time.monotonic() - started < 20
    (spent,) = result.payload()["usage"]
    assert spent["requests"] == 2 and spent["prompt_tokens"] == USAGE["prompt_tokens"]


def test_max_turns_hit_keeps_the_tokens_of_every_request(git_repo: Path, host: PluginHost, server: ModelServer) -> None:
    server.script = [READ]
    result = run(git_repo, host, coder_config(server, max_turns=3), [])
    assert (result.status, result.outcome) == ("halted", "coder_failed")
    # a coder failure earns fix attempts while the budget lasts: each attempt keeps its tokens
    spent = result.payload()["usage"]
    assert len(spent) == result.attempts + 1, spent
    for entry in spent:
        assert entry["requests"] == 3 and entry["prompt_tokens"] == 3 * USAGE["prompt_tokens"], entry


def test_a_missing_judge_key_halts_before_the_coders_first_request(
    git_repo: Path, host: PluginHost, server: ModelServer
) -> None:
    server.script = [SUBMIT]
    validators = [judge("review", "llm", "post_execute", server.base_url, api_key_env="NOPE_KEY")]
    result = run(git_repo, host, coder_config(server), validators)
    assert (result.status, result.outcome, result.phase) == ("halted", "environment_error", "governance")
    assert "validator 'review'" in result.message and "NOPE_KEY is not set" in result.message
    assert server.requests == []  # not one request: the coder never ran
    assert audit(git_repo, "token_issued") == [] and audit(git_repo, "dispatch") == []


def test_an_unreachable_judge_endpoint_halts_before_any_request(
    git_repo: Path, host: PluginHost, server: ModelServer
) -> None:
    dead = f"http://127.0.0.1:{closed_port()}/v1"
    validators = [judge("fit", "protocol", "pre_execute", dead)]
    result = run(git_repo, host, coder_config(server), validators)
    assert (result.outcome, result.phase) == ("environment_error", "governance")
    assert f"connection refused at {dead}" in result.message
    assert server.requests == []


@pytest.mark.slow
def test_a_slow_stream_ends_at_the_wall_clock_deadline(server: ModelServer) -> None:
    server.untooled = None
    server.script = [{"content": "warm"}, {"content": "x" * 80, "drip": 1.9}]  # a chunk every 1.9 s
    settings = ModelSettings(model=TOOL_MODEL, api_base=server.base_url, api_key_env=KEY, stream=True, max_retries=0)
    # the first call in a process imports litellm's provider modules; this test is about the stream
    _model.complete(settings, [{"role": "user", "content": "hi"}], timeout=60)
    started = time.monotonic()
    with pytest.raises(EnvironmentProblem, match="did not answer within 2s") as caught:
        _model.complete(settings, [{"role": "user", "content": "hi"}], timeout=2)
    elapsed = time.monotonic() - started
    assert elapsed < 3.5  # the bound is 2 s + thread hand-off; benchmarks/model_timeout.py measures it
    assert caught.value.usage["requests"] == 1  # type: ignore[attr-defined]
    assert len(server.requests) == 2


def test_connection_refused_is_named_with_the_url(host: PluginHost, git_repo: Path, server: ModelServer) -> None:
    dead = f"http://127.0.0.1:{closed_port()}/v1"
    settings = ModelSettings(model=TOOL_MODEL, api_base=dead, api_key_env=KEY, max_retries=0)
    with pytest.raises(EnvironmentProblem, match=f"connection refused at {dead}") as caught:
        _model.complete(settings, [{"role": "user", "content": "hi"}], timeout=60)
    assert "HTTP 500" not in str(caught.value)


def test_a_non_json_reply_quotes_the_start_of_the_body(server: ModelServer) -> None:
    body = "<html>" + "gateway says hi " * 40 + "</html>"
    server.untooled, server.script = None, [{"raw": body}]
    settings = ModelSettings(model=TOOL_MODEL, api_base=server.base_url, api_key_env=KEY, max_retries=0)
    with pytest.raises(EnvironmentProblem, match="not JSON") as caught:
        _model.complete(settings, [{"role": "user", "content": "hi"}], timeout=60)
    assert repr(body[:200]) in str(caught.value) and body[:201] not in str(caught.value)
    assert "Received response" not in str(caught.value)  # no litellm internals


def test_an_unknown_model_names_it_and_how_to_list_models(server: ModelServer) -> None:
    server.untooled, server.script = (
        None,
        [{"status": 404, "body": {"error": {"message": "The model `nope` does not exist"}}}],
    )
    settings = ModelSettings(model="openai/nope", api_base=server.base_url, api_key_env=KEY, max_retries=0)
    with pytest.raises(EnvironmentProblem, match="model 'openai/nope' is unknown") as caught:
        _model.complete(settings, [{"role": "user", "content": "hi"}], timeout=60)
    assert f"curl {server.base_url}/models" in str(caught.value)


def test_the_off_limits_list_names_each_path_once(tmp_path: Path) -> None:
    from snodo_plugins.coders._prompt import task_prompt

    request = CoderRequest(
        task_id="t", spec="s", workspace=tmp_path, mode_id="m", protected_paths=(".snodo/", ".git/", "secrets/**")
    )
    line = next(x for x in task_prompt(request).splitlines() if x.startswith("Off limits")).split(". ")[0]
    assert line.count(".snodo/") == 1 and line.count(".git/") == 1 and "secrets/**" in line


class _Signalled(BaseException):
    """Raised from a signal handler in the main thread, as the engine's ``Interrupted`` is."""


def test_an_interrupted_coder_carries_the_tokens_of_every_request(
    host: PluginHost, server: ModelServer, tmp_path: Path
) -> None:
    import signal

    server.script = [READ, {"hang": 30}]
    (tmp_path / "README.md").write_text("# demo\n")
    coder = HookedCoder(host, "litellm", coder_config(server))
    request = CoderRequest(task_id="t1", spec="add a greet module", workspace=tmp_path, mode_id="dev")

    def interrupt(_signum: int, _frame: Any) -> None:
        if len(server.requests) < 2:  # not hanging yet: look again shortly
            signal.setitimer(signal.ITIMER_REAL, 0.5)
            return
        raise _Signalled

    previous = signal.signal(signal.SIGALRM, interrupt)
    try:
        signal.setitimer(signal.ITIMER_REAL, 0.5)
        with pytest.raises(_Signalled) as caught:
            coder.generate(request)
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)
    assert len(server.requests) == 2  # interrupted while the second request hung
    spent = caught.value.usage  # type: ignore[attr-defined]
    assert spent["requests"] == 2 and spent["prompt_tokens"] == USAGE["prompt_tokens"]
