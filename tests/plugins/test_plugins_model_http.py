"""The litellm coder and the llm judge over the real litellm -> openai SDK -> HTTP path, against
a small OpenAI-compatible server on 127.0.0.1 (``model_server.py``): answers, streamed answers,
tool calls, and every provider failure ends in its documented message (docs/providers.md)."""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from hooked import HookedCoder
from model_server import USAGE, ModelServer

from snodo.api import CoderError, CoderRequest, CoderResult, EnvironmentProblem, ValidationRequest
from snodo.plugin.host import PluginHost

TOOL_MODEL = "openai/gpt-4o-mini"  # litellm knows it takes tool calls, and its price
TEXT_MODEL = "hosted_vllm/local-model"  # litellm has no function-calling data: asked in text
KEY = "SNODO_TEST_MODEL_KEY"

FILES = {"files": [{"op": "write", "path": "hello.py", "content": "def hello():\n    return 'hi'\n"}], "summary": "hi"}


@pytest.fixture
def server() -> Iterator[ModelServer]:
    with ModelServer() as running:
        yield running


@pytest.fixture(autouse=True)
def key(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(KEY, "sk-test")


def coder(host: PluginHost, server: ModelServer, **config: Any) -> Any:
    settings = {"model": TOOL_MODEL, "api_base": server.base_url, "api_key_env": KEY, "max_retries": 0, **config}
    return HookedCoder(host, "litellm", settings)


def request(ws: Path, **extra: Any) -> CoderRequest:
    fields: dict[str, Any] = {"task_id": "t1", "spec": "add a hello module", "workspace": ws, "mode_id": "dev"}
    return CoderRequest(**{**fields, **extra})


def generate(
    host: PluginHost, server: ModelServer, ws: Path, script: list[dict[str, Any]], **config: Any
) -> CoderResult:
    server.script = script
    return coder(host, server, **config).generate(request(ws))


def failure(host: PluginHost, server: ModelServer, ws: Path, reply: dict[str, Any], **config: Any) -> str:
    with pytest.raises(EnvironmentProblem) as caught:
        generate(host, server, ws, [reply], **config)
    return str(caught.value)


@pytest.mark.parametrize("stream", [False, True])
def test_tool_calls_read_then_submit(host: PluginHost, server: ModelServer, ws: Path, stream: bool) -> None:
    script = [
        {"tool_calls": [{"name": "read_file", "arguments": {"path": "src/app.py"}}]},
        {"tool_calls": [{"name": "submit_files", "arguments": FILES}]},
    ]
    result = generate(host, server, ws, script, stream=stream, temperature=0.2)
    assert [op.path for op in result.operations] == ["hello.py"]
    assert result.summary == "hi"
    first, second = (r["body"] for r in server.requests)
    assert first["model"] == "gpt-4o-mini" and first["temperature"] == 0.2
    assert [t["function"]["name"] for t in first["tools"]] == ["submit_files", "read_file", "list_files"]
    headers = {k.lower(): v for k, v in server.requests[0]["headers"].items()}
    assert headers["authorization"] == "Bearer sk-test"
    tool_answer = second["messages"][-1]
    assert tool_answer["role"] == "tool" and tool_answer["content"] == "print('app')\n"
    assert result.usage["requests"] == 2
    assert result.usage["prompt_tokens"] == 2 * USAGE["prompt_tokens"]
    assert result.usage["completion_tokens"] == 2 * USAGE["completion_tokens"]
    assert result.usage["cost_usd"] > 0  # litellm knows gpt-4o-mini's price


@pytest.mark.parametrize("stream", [False, True])
def test_text_model_sees_the_named_files_and_can_read_more(
    host: PluginHost, server: ModelServer, ws: Path, stream: bool
) -> None:
    script = [{"content": json.dumps({"read": ["README.md"]})}, {"content": "```json\n" + json.dumps(FILES) + "\n```"}]
    server.script = script
    work = coder(host, server, model=TEXT_MODEL, stream=stream)
    result = work.generate(request(ws, spec="make src/app.py print hello"))
    assert [op.path for op in result.operations] == ["hello.py"]
    first, second = (r["body"] for r in server.requests)
    assert "tools" not in first
    prompt = first["messages"][-1]["content"]
    assert "--- src/app.py\nprint('app')" in prompt  # the file the task names, in the prompt
    assert "--- README.md\n# demo" in second["messages"][-1]["content"]  # the read step's answer
    assert "cost_usd" not in result.usage  # litellm has no price for a local model


def test_findings_reach_the_next_attempt(host: PluginHost, server: ModelServer, ws: Path) -> None:
    server.script = [{"tool_calls": [{"name": "submit_files", "arguments": FILES}]}]
    findings = ("tests: 1 failed: tests/test_hello.py::test_hello\nAssertionError: assert 'hi' == 'hello'",)
    coder(host, server).generate(request(ws, findings=findings, attempt=1))
    prompt = server.requests[0]["body"]["messages"][-1]["content"]
    assert "attempt 2" in prompt and "tests/test_hello.py::test_hello" in prompt
    assert "assert 'hi' == 'hello'" in prompt


def test_401_says_the_credentials_were_rejected(host: PluginHost, server: ModelServer, ws: Path) -> None:
    body = {"error": {"message": "Incorrect API key provided: sk-test", "type": "invalid_request_error"}}
    text = failure(host, server, ws, {"status": 401, "body": body})
    assert "rejected the credentials (HTTP 401): Incorrect API key provided" in text
    assert f"check that {KEY} holds a valid key" in text


def test_404_says_the_model_is_unknown(host: PluginHost, server: ModelServer, ws: Path) -> None:
    body = {"error": {"message": "The model `gpt-4o-mini` does not exist", "code": "model_not_found"}}
    text = failure(host, server, ws, {"status": 404, "body": body})
    assert f"model '{TOOL_MODEL}' is unknown to the provider at {server.base_url} (HTTP 404)" in text
    assert "does not exist" in text and "provider prefix" in text


def test_429_is_retried_max_retries_times(host: PluginHost, server: ModelServer, ws: Path) -> None:
    text = failure(host, server, ws, {"status": 429}, max_retries=1)
    assert "rate limited by the provider (HTTP 429) after 2 attempt(s)" in text
    assert len(server.requests) == 2  # one retry, ours: the SDK's hidden retries are off


def test_429_then_success(host: PluginHost, server: ModelServer, ws: Path) -> None:
    script = [{"status": 429}, {"tool_calls": [{"name": "submit_files", "arguments": FILES}]}]
    result = generate(host, server, ws, script, max_retries=1)
    assert [op.path for op in result.operations] == ["hello.py"]
    assert result.usage["requests"] == 2


def test_500_says_the_provider_is_down(host: PluginHost, server: ModelServer, ws: Path) -> None:
    text = failure(host, server, ws, {"status": 500})
    assert f"the provider at {server.base_url} is down or unreachable (HTTP 500): error 500" in text
    assert len(server.requests) == 1  # max_retries 0


@pytest.mark.parametrize("stream", [False, True])
def test_garbage_body_is_a_malformed_reply(host: PluginHost, server: ModelServer, ws: Path, stream: bool) -> None:
    text = failure(host, server, ws, {"raw": "<html>gateway says hi</html>"}, stream=stream)
    assert "sent a malformed reply" in text


@pytest.mark.parametrize("stream", [False, True])
def test_empty_choices_is_a_malformed_reply(host: PluginHost, server: ModelServer, ws: Path, stream: bool) -> None:
    text = failure(host, server, ws, {"empty_choices": True}, stream=stream)
    assert "sent a malformed reply" in text
    if not stream:
        assert "no choices" in text


@pytest.mark.slow
@pytest.mark.parametrize("stream", [False, True])
def test_a_hang_ends_within_the_timeout(host: PluginHost, server: ModelServer, ws: Path, stream: bool) -> None:
    # litellm imports its provider modules on its first call in a process: not the provider's time
    generate(host, server, ws, [{"tool_calls": [{"name": "submit_files", "arguments": FILES}]}])
    server.served, server.requests = 0, []
    started = time.monotonic()
    text = failure(host, server, ws, {"hang": 60}, timeout=1.5, max_retries=3, stream=stream)
    elapsed = time.monotonic() - started
    assert "did not answer within" in text or "timed out" in text
    assert elapsed < 1.5 + 3  # the real bound is timeout + 1 s; benchmarks/model_timeout.py measures it
    assert len(server.requests) == 1  # a timeout used the whole budget: no retry


def test_missing_key_is_refused_by_the_preflight_before_any_request(
    host: PluginHost, server: ModelServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv(KEY)
    with pytest.raises(EnvironmentProblem, match=f"no credentials for model '{TOOL_MODEL}': {KEY} is not set"):
        coder(host, server)
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    with pytest.raises(EnvironmentProblem, match="OPENAI_API_KEY is not set"):
        HookedCoder(host, "litellm", {"model": TOOL_MODEL, "api_base": server.base_url})
    assert server.requests == []


@pytest.mark.parametrize(
    ("setting", "value", "needle"),
    [
        ("max_retries", -1, "max_retries: expected a whole number"),
        ("api_base", 3, "api_base: expected a non-empty string"),
        ("stream", "yes", "stream: expected true or false"),
    ],
)
def test_bad_provider_settings_are_refused(
    host: PluginHost, server: ModelServer, setting: str, value: Any, needle: str
) -> None:
    with pytest.raises(CoderError, match=needle):
        coder(host, server, **{setting: value})


def test_llm_judge_reaches_its_own_endpoint(
    host: PluginHost, server: ModelServer, ws: Path, vrequest: Callable[..., ValidationRequest]
) -> None:
    server.script = [{"content": '{"severity": "pass", "justification": "looks right"}'}]
    tooling = {"api_base": server.base_url, "api_key_env": KEY, "temperature": 0, "max_retries": 0}
    verdict = host.validate(vrequest(ws, "llm", model=TEXT_MODEL, tooling=tooling, criteria=("is tidy",)))
    assert verdict is not None and verdict.severity == "pass"
    assert verdict.details["usage"]["prompt_tokens"] == USAGE["prompt_tokens"]
    assert server.requests[0]["body"]["temperature"] == 0


def test_llm_judge_failures_are_classified(
    host: PluginHost, server: ModelServer, ws: Path, vrequest: Callable[..., ValidationRequest]
) -> None:
    server.script = [{"status": 401}]
    tooling = {"api_base": server.base_url, "api_key_env": KEY, "max_retries": 0}
    with pytest.raises(EnvironmentProblem, match="rejected the credentials"):
        host.validate(vrequest(ws, "llm", model=TEXT_MODEL, tooling=tooling))


def test_llm_judge_names_an_unset_key_variable_before_calling(
    host: PluginHost,
    server: ModelServer,
    ws: Path,
    vrequest: Callable[..., ValidationRequest],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv(KEY)
    tooling = {"api_base": server.base_url, "api_key_env": KEY}
    with pytest.raises(EnvironmentProblem, match=f"{KEY} is not set"):
        host.validate(vrequest(ws, "llm", model=TOOL_MODEL, tooling=tooling))
    monkeypatch.setenv("OPENAI_API_KEY", "  ")  # set but blank counts as unset
    with pytest.raises(EnvironmentProblem, match="OPENAI_API_KEY is not set"):
        host.validate(vrequest(ws, "llm", model=TOOL_MODEL, tooling={"api_base": server.base_url}))
    assert server.requests == []


def test_llm_judge_refuses_unknown_and_mistyped_tooling(
    host: PluginHost, server: ModelServer, ws: Path, vrequest: Callable[..., ValidationRequest]
) -> None:
    from snodo.api import ValidatorFault

    with pytest.raises(ValidatorFault, match=r"unknown tooling key.*api_bse"):
        host.validate(vrequest(ws, "llm", model=TOOL_MODEL, tooling={"api_bse": server.base_url}))
    with pytest.raises(ValidatorFault, match=r"tooling\.max_retries: expected a whole number"):
        host.validate(vrequest(ws, "llm", model=TOOL_MODEL, tooling={"max_retries": "two"}))
