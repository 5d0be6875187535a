"""The litellm coder, offline through litellm's own ``mock_response``: text and tool-call
replies become validated operations; provider failures become environment problems
naming the model; garbage is a coder error quoting it."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import litellm
import pytest
from hooked import HookedCoder
from snodo_plugins.coders._tools import answer

from snodo.api import CoderError, CoderRequest, CoderResult, EnvironmentProblem, FileOperation
from snodo.plugin.host import PluginHost

MODEL = "openai/gpt-4o-mini"  # litellm knows it takes function calls
TEXT_MODEL = "ollama/some-local-model"  # litellm has no function-calling data: asked in text

FILES = {
    "files": [
        {"op": "write", "path": "hello.py", "content": "def hello():\n    return 'hi'\n"},
        {"op": "delete", "path": "old.py"},
    ],
    "summary": "added hello",
}
EXPECTED = (
    FileOperation(op="write", path="hello.py", content="def hello():\n    return 'hi'\n"),
    FileOperation(op="delete", path="old.py"),
)


def tool_call_reply(name: str, arguments: dict[str, Any], call_id: str = "call_1") -> dict[str, Any]:
    """A provider reply carrying one tool call, as litellm builds a ModelResponse from a mapping."""
    return {
        "choices": [
            {
                "index": 0,
                "finish_reason": "tool_calls",
                "message": {
                    "role": "assistant",
                    "content": None,
                    "tool_calls": [
                        {
                            "id": call_id,
                            "type": "function",
                            "function": {"name": name, "arguments": json.dumps(arguments)},
                        }
                    ],
                },
            }
        ]
    }


def run(host: PluginHost, workspace: Path, config: dict[str, Any], log: list[str] | None = None) -> CoderResult:
    coder = HookedCoder(host, "litellm", {"model": MODEL, **config})
    request = CoderRequest(
        task_id="t1",
        spec="add a hello module",
        workspace=workspace,
        mode_id="dev",
        criteria=("`hello` is defined",),
        findings=("tests failed",),
        attempt=1,
        log=(log.append if log is not None else lambda _line: None),
    )
    return coder.generate(request)


def test_json_in_text_reply_becomes_operations(host: PluginHost, ws: Path) -> None:
    reply = "Here you go:\n```json\n" + json.dumps(FILES) + "\n```\nDone."
    result = run(host, ws, {"mock_response": reply})
    assert result.operations == EXPECTED
    assert result.summary == "added hello"
    assert result.usage["turns"] == 1 and result.usage["model"] == MODEL


def test_bare_json_reply_from_a_model_without_function_calling(host: PluginHost, ws: Path) -> None:
    coder = HookedCoder(host, "litellm", {"model": TEXT_MODEL, "mock_response": json.dumps(FILES)})
    result = coder.generate(CoderRequest(task_id="t", spec="s", workspace=ws, mode_id="dev"))
    assert result.operations == EXPECTED


def test_tool_call_reply_becomes_operations(host: PluginHost, ws: Path) -> None:
    result = run(host, ws, {"mock_response": tool_call_reply("submit_files", FILES)})
    assert result.operations == EXPECTED


def test_context_tools_then_submit(host: PluginHost, ws: Path) -> None:
    log: list[str] = []
    turns = [
        tool_call_reply("list_files", {}),
        tool_call_reply("read_file", {"path": "src/app.py"}),
        tool_call_reply("submit_files", FILES),
    ]
    result = run(host, ws, {"mock_response": turns}, log)
    assert result.operations == EXPECTED
    assert result.usage["turns"] == 3
    assert [line.split(": ", 1)[1] for line in log if line.startswith("litellm: ")] == [
        f"{MODEL} turn {n}: 1 tool call(s)" for n in (1, 2, 3)
    ]


def test_read_tools_stay_inside_the_workspace(ws: Path, tmp_path: Path) -> None:
    (tmp_path / "outside.txt").write_text("secret")
    (ws / "escape").symlink_to(tmp_path / "outside.txt")
    assert answer(ws, "read_file", json.dumps({"path": "src/app.py"})) == "print('app')\n"
    for path in ("../outside.txt", str(tmp_path / "outside.txt"), "escape"):
        assert answer(ws, "read_file", json.dumps({"path": path})).startswith("error:")
    assert answer(ws, "list_files", "{}").splitlines() == ["README.md", "escape", "src/app.py"]
    assert answer(ws, "list_files", json.dumps({"path": "src"})) == "src/app.py"
    assert answer(ws, "list_files", json.dumps({"path": ".."})).startswith("error:")
    assert answer(ws, "write_file", "{}").startswith("error: there is no tool")


def test_authentication_error_names_model_and_variable(
    host: PluginHost, ws: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    bad_key = litellm.AuthenticationError(message="invalid api key", llm_provider="openai", model=MODEL)
    with pytest.raises(EnvironmentProblem) as caught:
        run(host, ws, {"mock_response": bad_key})
    assert MODEL in caught.value.message
    assert "OPENAI_API_KEY" in str(caught.value)
    with pytest.raises(EnvironmentProblem, match="MY_KEY"):
        run(host, ws, {"mock_response": bad_key, "api_key_env": "MY_KEY"})


def test_missing_key_variable_is_reported_before_any_call(
    host: PluginHost, ws: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("SNODO_TEST_NO_SUCH_KEY", raising=False)
    with pytest.raises(EnvironmentProblem, match="SNODO_TEST_NO_SUCH_KEY is not set"):
        run(host, ws, {"api_key_env": "SNODO_TEST_NO_SUCH_KEY"})


@pytest.mark.parametrize(
    ("error", "needle"),
    [
        (litellm.APIConnectionError, "could not connect at the provider.s endpoint"),
        (litellm.ServiceUnavailableError, "the provider is down or unreachable"),
        (litellm.Timeout, "did not answer within the timeout"),
    ],
)
def test_unreachable_provider_is_an_environment_problem(host: PluginHost, ws: Path, error: Any, needle: str) -> None:
    with pytest.raises(EnvironmentProblem, match=f"model '{MODEL}'.*{needle}"):
        run(host, ws, {"max_retries": 0, "mock_response": error(message="down", llm_provider="openai", model=MODEL)})


@pytest.mark.parametrize(
    ("reply", "needle"),
    [
        ("I'd rather not write any code today.", "without usable file operations: \"I'd rather not"),
        ('{"changes": []}', 'no "files" list'),
        (json.dumps({"files": [{"op": "write", "path": "a.py"}]}), r"files\[0\] is not a valid operation"),
        (json.dumps({"files": [{"op": "rename", "path": "a.py"}]}), r"files\[0\]"),
    ],
)
def test_garbage_is_a_coder_error_with_an_excerpt(host: PluginHost, ws: Path, reply: str, needle: str) -> None:
    with pytest.raises(CoderError, match=needle):
        run(host, ws, {"mock_response": reply})


def test_turns_are_bounded(host: PluginHost, ws: Path) -> None:
    with pytest.raises(CoderError, match="submitted no files within 2 turns"):
        run(host, ws, {"mock_response": tool_call_reply("list_files", {}), "max_turns": 2})


@pytest.mark.parametrize(
    ("config", "needle"),
    [
        ({}, "no model"),
        ({"model": MODEL, "modle": "x"}, "unknown coder_config key.*modle"),
        ({"model": MODEL, "max_turns": 0}, "max_turns: expected a positive integer"),
        ({"model": MODEL, "timeout": "soon"}, "timeout: expected a positive number"),
    ],
)
def test_config_is_checked_up_front(host: PluginHost, config: dict[str, Any], needle: str) -> None:
    with pytest.raises(CoderError, match=needle):
        HookedCoder(host, "litellm", config)
