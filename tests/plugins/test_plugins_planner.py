"""Planning through the ``snodo_planner`` hook: the built-in model planner on the shared model
client (over real HTTP to a local OpenAI-compatible server), the core's deterministic fallback,
and a third-party planner taking precedence."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest
from model_server import ModelServer

from snodo.api import CoderError, EnvironmentProblem, Mode, hookimpl
from snodo.base.errors import ToolError
from snodo.engine.plans import Planner
from snodo.plugin.host import PluginHost, get_plugin_manager

KEY = "SNODO_TEST_PLANNER_KEY"


@pytest.fixture
def server(monkeypatch: pytest.MonkeyPatch) -> Iterator[ModelServer]:
    monkeypatch.setenv(KEY, "sk-plan")
    with ModelServer() as running:
        yield running


def modelled(server: ModelServer, **extra: Any) -> Mode:
    config = {"model": "hosted_vllm/planner", "api_base": server.base_url, "max_retries": 0, **extra}
    return Mode(mode_id="lead", coder="litellm", coder_config=config)


def test_the_model_planner_asks_the_modes_model(host: PluginHost, server: ModelServer) -> None:
    tasks = [{"title": "Add the parser", "spec": "Add a parser.\nAcceptance criteria:\n- parses"}, "write the printer"]
    server.script = [{"content": "```json\n" + json.dumps(tasks) + "\n```"}, {"content": "Spec for one task"}]
    planner = Planner.for_mode(modelled(server, temperature=0.1), host)
    assert planner.name == "model:hosted_vllm/planner" and planner.model == "hosted_vllm/planner"
    got = planner.tasks("a pretty-printer")
    assert got == [
        {"title": "Add the parser", "spec": "Add a parser.\nAcceptance criteria:\n- parses\n"},
        {"title": "Write the printer", "spec": "Write the printer.\n"},
    ]
    assert planner.spec("add a cache") == "Spec for one task\n"
    first = server.requests[0]["body"]
    assert first["temperature"] == 0.1 and "Goal:\na pretty-printer" in first["messages"][-1]["content"]


def test_model_planner_failures_are_classified_and_never_fall_back(host: PluginHost, server: ModelServer) -> None:
    planner = Planner.for_mode(modelled(server), host)
    server.script = [{"status": 404}]
    with pytest.raises(EnvironmentProblem, match="unknown to the provider"):
        planner.tasks("a goal")
    server.script, server.served = [{"content": "sure, I can help with that"}], 0
    with pytest.raises(CoderError, match="did not answer with a JSON task list"):
        planner.tasks("a goal")


def test_deterministic_for_mock_or_no_model(host: PluginHost) -> None:
    for mode in (
        Mode(mode_id="m", coder="mock", coder_config={"model": "x/y"}),
        Mode(mode_id="m", coder="litellm"),
    ):
        planner = Planner.for_mode(mode, host)
        assert planner.name == "deterministic" and planner.model is None
        assert planner.tasks("- one\n- two\n") == [
            {"title": "One", "spec": "One.\n"},
            {"title": "Two", "spec": "Two.\n"},
        ]


class _Shouty:
    """A third-party plugin's planner; the second one returns something that is not a task list."""

    name = "shouty"

    def __init__(self, broken: bool = False) -> None:
        self.broken = broken

    def tasks(self, goal: str) -> Any:
        return [{"title": goal.upper()}] if self.broken else [{"title": goal.upper(), "spec": goal.upper() + "!"}]

    def spec(self, task: str, context: str | None = None) -> str:
        return task.upper()


def test_a_plugin_planner_wins_and_its_output_is_checked() -> None:
    class Plugin:
        def __init__(self, broken: bool) -> None:
            self.broken = broken

        @hookimpl
        def snodo_planner(self, mode: Mode) -> _Shouty | None:
            return _Shouty(self.broken) if mode.coder == "patch" else None

    host = get_plugin_manager(plugins=[Plugin(broken=False)])
    planner = Planner.for_mode(Mode(mode_id="m", coder="patch"), host)
    assert planner.tasks("go") == [{"title": "GO", "spec": "GO!"}] and planner.spec("x") == "X\n"
    assert Planner.for_mode(Mode(mode_id="m", coder="mock"), host).name == "deterministic"
    broken = Planner.for_mode(Mode(mode_id="m", coder="patch"), get_plugin_manager(plugins=[Plugin(broken=True)]))
    with pytest.raises(ToolError, match=r"not \{title, spec\}"):
        broken.tasks("go")
