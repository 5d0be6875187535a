"""Every hook goes through pluggy: wrappers, tracing and hook-call monitoring see each call.

A third-party plugin written the way pluggy's docs teach (``wrapper=True`` and the older
``hookwrapper=True``) must work around both a registration hook and the dispatch hook, and
``pm.trace.root.setwriter`` must see every hook call of a governed run.
"""

from __future__ import annotations

from collections import Counter
from pathlib import Path
from typing import Any

import attrs
import pytest

from snodo.api import ValidatorSpec, Verdict, hookimpl
from snodo.base.errors import PluginError
from snodo.engine.loop import Engine
from snodo.governance.service import Project
from snodo.plugin.host import get_plugin_manager
from snodo.plugin.records import ValidationRequest
from snodo.protocol import load_protocol, parse_protocol
from tests.conftest import git

PROTOCOL = """\
protocol_id: t
name: t
modes:
  - mode_id: producer
    tools: [read, edit, validate, dispatch]
    validators: [scope, tests]
    coder: mock
validators:
  - {validator_id: scope, validator_type: protocol}
  - {validator_id: tests, validator_type: pytest, evaluation_phase: post_execute}
"""


class Observer:
    """A third-party plugin that only wraps: it sees registrations and verdicts, and marks them."""

    def __init__(self) -> None:
        self.registrations: list[list[str]] = []
        self.verdicts: list[str] = []

    @hookimpl(wrapper=True)
    def snodo_coders(self):  # type: ignore[no-untyped-def]
        batches = yield
        batches = [list(batch or ()) for batch in batches]
        self.registrations.append([spec.name for batch in batches for spec in batch])
        return batches

    @hookimpl(wrapper=True)
    def snodo_validate(self, request):  # type: ignore[no-untyped-def]
        verdict = yield
        self.verdicts.append(request.validator.validator_id)
        if verdict is None:
            return None
        return attrs.evolve(verdict, justification=verdict.justification + " [observed]")


class OldStyle:
    """The pre-1.1 ``hookwrapper=True`` form, still supported by pluggy."""

    def __init__(self) -> None:
        self.seen = 0

    @hookimpl(hookwrapper=True)
    def snodo_validators(self):  # type: ignore[no-untyped-def]
        outcome = yield
        self.seen += len(outcome.get_result())


def _project(repo: Path, host: Any) -> Project:
    (repo / ".snodo").mkdir(exist_ok=True)
    (repo / ".snodo" / "protocol.yml").write_text(PROTOCOL)
    git(repo, "add", ".snodo/protocol.yml")
    git(repo, "commit", "-q", "-m", "protocol")
    return Project(load_protocol(repo / ".snodo" / "protocol.yml", host), host)


def test_wrappers_and_tracing_see_every_hook_call_of_a_run(git_repo: Path) -> None:
    observer, old = Observer(), OldStyle()
    host = get_plugin_manager(plugins=[observer, old])
    trace: list[str] = []
    monitored: list[tuple[str, tuple[str, ...]]] = []
    host.pm.trace.root.setwriter(trace.append)
    host.pm.enable_tracing()
    host.pm.add_hookcall_monitoring(
        lambda name, impls, _kwargs: monitored.append((name, tuple(i.plugin_name for i in impls))),
        lambda *_args: None,
    )

    result = Engine(_project(git_repo, host)).run("add a hello module")
    assert result.status == "completed", result

    # the wrapper around the registration hook saw the built-in coders being registered
    assert ["mock"] in observer.registrations and ["litellm"] in observer.registrations
    assert host.coder("mock").name == "mock"
    assert old.seen >= 1
    # the wrapper around the dispatch hook saw (and marked) every verdict of the run
    assert observer.verdicts == ["scope", "tests"]
    # every hook call reached the tracer: pluggy writes "<hook> [hook]" (then its kwargs) per call
    heads = [message.splitlines()[0].split() for message in trace]
    traced = Counter(head[0] for head in heads if head[-1] == "[hook]" and head[0] != "finish")
    called = Counter(name for name, _ in monitored)
    assert traced == called
    assert {"snodo_coders", "snodo_validators", "snodo_predicates", "snodo_validate", "snodo_filter_artifacts"} <= set(
        called
    )
    assert called["snodo_validate"] == 2
    # each dispatch asked only the owning plugin, inside the third-party wrapper
    validate_calls = [impls for name, impls in monitored if name == "snodo_validate"]
    assert all("Observer-0" in impls and len(impls) == 2 for impls in validate_calls)


def test_a_wrapper_changes_the_verdict_the_runner_records() -> None:
    host = get_plugin_manager(entrypoints=False, plugins=[Answers(), Observer()])
    verdict = host.validate(_request("always-pass"))
    assert verdict is not None and verdict.justification == "fine [observed]"


class Answers:
    @hookimpl
    def snodo_validators(self):  # type: ignore[no-untyped-def]
        yield ValidatorSpec(name="always-pass", description="passes")

    @hookimpl
    def snodo_validate(self, request):  # type: ignore[no-untyped-def]
        if request.validator.validator_type == "always-pass":
            return Verdict(severity="pass", justification="fine")
        return None


class Late:
    @hookimpl
    def snodo_validators(self):  # type: ignore[no-untyped-def]
        yield ValidatorSpec(name="late", description="registered after start-up")

    @hookimpl
    def snodo_validate(self, request):  # type: ignore[no-untyped-def]
        return Verdict(severity="warn", justification="late but seen")


def _request(vtype: str) -> ValidationRequest:
    proto = parse_protocol(
        "protocol_id: p\nname: p\nmodes: [{mode_id: m, validators: [v]}]\n"
        f"validators: [{{validator_id: v, validator_type: {vtype}}}]\n"
    )
    return ValidationRequest(
        validator=proto.validators[0],
        task_id="t",
        task_spec="s",
        phase="pre_execute",
        mode=proto.modes[0],
        protocol=proto,
        workspace=Path("."),
    )


def test_a_plugin_registered_after_start_up_is_seen_and_one_removed_is_gone() -> None:
    host = get_plugin_manager(entrypoints=False, plugins=[Answers()])
    assert list(host.validators()) == ["always-pass"]
    late = Late()
    host.pm.register(late, name="late-plugin")  # plain pluggy, after the first lookup
    assert list(host.validators()) == ["always-pass", "late"]
    assert host.owner_of("validator", "late") == "late-plugin"
    verdict = host.validate(_request("late"))
    assert verdict is not None and verdict.justification == "late but seen"
    host.pm.unregister(late)
    with pytest.raises(PluginError, match="no validator type named 'late'"):
        host.validator("late")


def test_none_from_the_owner_is_no_verdict_and_no_other_plugin_answers() -> None:
    """``snodo_validate`` is firstresult over the owning plugin only: ``None`` is not "ask the
    next plugin" (that would let any plugin answer for another's type)."""

    class Silent:
        @hookimpl
        def snodo_validators(self):  # type: ignore[no-untyped-def]
            yield ValidatorSpec(name="silent", description="never answers")

        @hookimpl
        def snodo_validate(self, request):  # type: ignore[no-untyped-def]
            return None

    class Greedy:
        @hookimpl
        def snodo_validate(self, request):  # type: ignore[no-untyped-def]
            return Verdict(severity="pass", justification="answers for anyone")

    host = get_plugin_manager(entrypoints=False, plugins=[Silent(), Greedy()])
    assert host.validate(_request("silent")) is None
