"""Every mapping or list a plugin receives is read-only, even while other validators run.

Two validators of one phase run concurrently in the shared runner (ADR 015). One tries
every mutation a careless plugin might (its own ``tooling``, the mode's ``coder_config``,
the protocol's ``metadata``, another validator's settings, a constraint's ``params``…) while
the other, blocked until the first is done, reads the same protocol: each attempt must
raise, and the reader must see the protocol exactly as loaded. A predicate and a coder get
the same treatment for ``params`` and ``coder_config``.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from snodo.api import (
    CoderCapabilities,
    CoderResult,
    CoderSpec,
    PredicateResult,
    PredicateSpec,
    ValidatorSpec,
    Verdict,
    hookimpl,
)
from snodo.governance.runner import PhaseInput, run_phase
from snodo.plugin.host import get_plugin_manager
from snodo.plugin.records import CoderRequest
from snodo.protocol import parse_protocol

PROTOCOL = """\
protocol_id: p
name: p
metadata: {owner: {team: core, tags: [a, b]}}
modes:
  - mode_id: m
    validators: [mutator, reader]
    coder: frozen-check
    coder_config: {model: x, nested: {deep: [1, 2]}}
    constraints:
      - {constraint_id: c, predicate: frozen-params, params: {limit: 3, paths: [src]}}
validators:
  - {validator_id: mutator, validator_type: mutates, tooling: {timeout: 30, opts: {k: [1]}}}
  - {validator_id: reader, validator_type: reads, tooling: {timeout: 30}}
"""


def _request_mutations(request: Any) -> dict[str, Callable[[], object]]:
    tooling, mode, protocol = request.validator.tooling, request.mode, request.protocol
    other = protocol.validators[1].tooling
    return {
        "tooling[k] = v": lambda: tooling.__setitem__("timeout", 0),
        "del tooling[k]": lambda: tooling.__delitem__("timeout"),
        "tooling.update": lambda: tooling.update(timeout=1),
        "tooling.pop": lambda: tooling.pop("opts"),
        "tooling nested dict": lambda: tooling["opts"].__setitem__("k", []),
        "tooling nested list": lambda: tooling["opts"]["k"].append(2),
        "tooling |=": lambda: tooling.__ior__({"x": 1}),
        "another validator's tooling": lambda: other.__setitem__("timeout", 0.001),
        "mode.coder_config": lambda: mode.coder_config.__setitem__("model", "evil"),
        "mode.coder_config nested": mode.coder_config["nested"]["deep"].clear,
        "protocol.metadata": lambda: protocol.metadata["owner"].__setitem__("team", "evil"),
        "protocol.metadata list": lambda: protocol.metadata["owner"]["tags"].sort(reverse=True),
        "constraint params": lambda: mode.constraints[0].params.__setitem__("limit", 0),
        "changed_files": lambda: request.changed_files.append("x"),  # type: ignore[attr-defined]
        "the request itself": lambda: setattr(request, "phase", "post_execute"),
        "the validator record": lambda: setattr(request.validator, "tooling", {}),
    }


class Plugins:
    def __init__(self) -> None:
        self.mutated = threading.Event()
        self.outcomes: dict[str, str] = {}
        self.seen_by_reader: dict[str, Any] = {}
        self.params_outcomes: list[str] = []
        self.config_outcomes: list[str] = []

    @hookimpl
    def snodo_validators(self):  # type: ignore[no-untyped-def]
        yield ValidatorSpec(name="mutates", description="tries to change what it was given", settings=("opts",))
        yield ValidatorSpec(name="reads", description="reads while the other one runs")

    @hookimpl
    def snodo_validate(self, request):  # type: ignore[no-untyped-def]
        if request.validator.validator_type == "mutates":
            for what, mutate in _request_mutations(request).items():
                try:
                    mutate()
                except (TypeError, AttributeError) as exc:  # attrs' FrozenInstanceError is an AttributeError
                    self.outcomes[what] = type(exc).__name__
                else:
                    self.outcomes[what] = "CHANGED"
            self.mutated.set()
            return Verdict(severity="pass", justification="tried")
        assert self.mutated.wait(20), "the two validators did not run concurrently"
        self.seen_by_reader = {
            "mutator tooling": dict(request.protocol.validators[0].tooling),
            "own timeout": request.validator.timeout,
            "coder_config": request.mode.coder_config,
            "metadata": request.protocol.metadata,
        }
        return Verdict(severity="pass", justification="read")

    @hookimpl
    def snodo_predicates(self):  # type: ignore[no-untyped-def]
        yield PredicateSpec(name="frozen-params", description="tries to change its params")

    @hookimpl
    def snodo_check_predicate(self, name: str, context: Any, params: Any) -> PredicateResult:
        for mutate in (lambda: params.__setitem__("limit", 0), lambda: params["paths"].append("x")):
            try:
                mutate()
                self.params_outcomes.append("CHANGED")
            except TypeError:
                self.params_outcomes.append("TypeError")
        return PredicateResult(ok=True, message="ok")

    @hookimpl
    def snodo_coders(self):  # type: ignore[no-untyped-def]
        yield CoderSpec(
            name="frozen-check",
            description="tries to change its config",
            capabilities=CoderCapabilities(
                writes_in_place=False, commits_own_changes=False, settings=("model", "nested")
            ),
        )

    @hookimpl
    def snodo_generate(self, name: str, request: CoderRequest) -> CoderResult:
        outcomes = self.config_outcomes

        class Coder:
            def __init__(self, config: Any) -> None:
                for mutate in (lambda: config.__setitem__("model", "y"), config["nested"]["deep"].pop):
                    try:
                        mutate()
                        outcomes.append("CHANGED")
                    except TypeError:
                        outcomes.append("TypeError")

            def generate(self, request: CoderRequest) -> CoderResult:
                try:
                    request.config["nested"]["deep"].append(3)
                    outcomes.append("CHANGED")
                except TypeError:
                    outcomes.append("TypeError")
                return CoderResult()

        return Coder(request.config).generate(request)


def test_every_plugin_input_refuses_mutation_while_validators_run_concurrently(tmp_path: Path) -> None:
    plugins = Plugins()
    host = get_plugin_manager(entrypoints=False, plugins=[plugins])
    protocol = parse_protocol(PROTOCOL)
    inp = PhaseInput(
        protocol=protocol,
        mode=protocol.modes[0],
        phase="pre_execute",
        task_id="t",
        task_spec="s",
        workspace=tmp_path,
    )
    results = run_phase(host, inp)
    assert [(r.validator_id, r.severity) for r in results] == [
        ("mutator", "pass"),
        ("reader", "pass"),
        ("constraint:c", "pass"),
    ]

    changed = [what for what, outcome in plugins.outcomes.items() if outcome == "CHANGED"]
    assert changed == [], f"a plugin changed: {changed}"
    assert len(plugins.outcomes) == 16
    assert plugins.seen_by_reader == {
        "mutator tooling": {"timeout": 30, "opts": {"k": [1]}},
        "own timeout": 30.0,
        "coder_config": {"model": "x", "nested": {"deep": [1, 2]}},
        "metadata": {"owner": {"team": "core", "tags": ["a", "b"]}},
    }
    assert plugins.params_outcomes == ["TypeError", "TypeError"]
    assert protocol.modes[0].constraints[0].params == {"limit": 3, "paths": ["src"]}

    host.generate(
        "frozen-check",
        CoderRequest(task_id="t", spec="s", workspace=tmp_path, mode_id="m", config=protocol.modes[0].coder_config),
    )
    assert plugins.config_outcomes == ["TypeError", "TypeError", "TypeError"]
    assert protocol.modes[0].coder_config == {"model": "x", "nested": {"deep": [1, 2]}}


@pytest.mark.parametrize("field", ["tooling", "coder_config", "params", "metadata"])
def test_the_loaded_protocol_hands_out_frozen_settings(field: str) -> None:
    protocol = parse_protocol(PROTOCOL)
    value = {
        "tooling": protocol.validators[0].tooling,
        "coder_config": protocol.modes[0].coder_config,
        "params": protocol.modes[0].constraints[0].params,
        "metadata": protocol.metadata,
    }[field]
    with pytest.raises(TypeError, match="read-only"):
        value["new"] = 1  # type: ignore[index]
