"""One extension shape for coders, validator types and predicates: a registration hook
yielding a record that carries no callable, and a ``firstresult`` dispatch hook asked, with
the registered name, on the registering plugin only (inside every wrapper)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from snodo.api import (
    CoderCapabilities,
    CoderError,
    CoderRequest,
    CoderResult,
    CoderSpec,
    PredicateContext,
    PredicateResult,
    PredicateSpec,
    hookimpl,
)
from snodo.plugin.host import get_plugin_manager

CAPS = CoderCapabilities(writes_in_place=False, commits_own_changes=False)


class Own:
    """Registers coder ``own`` and predicate ``own_pred``; answers for any name it is asked."""

    def __init__(self, label: str, coder: str = "own", predicate: str = "own_pred") -> None:
        self.label, self.coder, self.predicate = label, coder, predicate
        self.asked: list[str] = []

    @hookimpl
    def snodo_coders(self):  # type: ignore[no-untyped-def]
        yield CoderSpec(name=self.coder, description="d", capabilities=CAPS)

    @hookimpl
    def snodo_generate(self, name: str, request: CoderRequest) -> CoderResult:
        self.asked.append(name)
        return CoderResult(summary=f"{self.label} for {name} with {dict(request.config)}")

    @hookimpl
    def snodo_predicates(self):  # type: ignore[no-untyped-def]
        yield PredicateSpec(name=self.predicate, description="d")

    @hookimpl
    def snodo_check_predicate(self, name: str, context: PredicateContext, params: Any) -> PredicateResult:
        self.asked.append(name)
        return PredicateResult(ok=True, message=f"{self.label} for {name} with {dict(params)}")


class Wrapper:
    """A third-party wrapper around both dispatch hooks, as pluggy's docs teach."""

    def __init__(self) -> None:
        self.seen: list[tuple[str, str]] = []

    @hookimpl(wrapper=True)
    def snodo_generate(self, name: str, request: CoderRequest):  # type: ignore[no-untyped-def]
        result = yield
        self.seen.append(("generate", name))
        return result

    @hookimpl(wrapper=True)
    def snodo_check_predicate(self, name: str, context: PredicateContext, params: Any):  # type: ignore[no-untyped-def]
        result = yield
        self.seen.append(("check_predicate", name))
        return result


def _context(tmp_path: Path) -> PredicateContext:
    return PredicateContext(workspace=tmp_path, task_id="t", task_spec="s", phase="post_execute")


def test_each_name_is_answered_by_its_own_plugin_only_inside_every_wrapper(tmp_path: Path) -> None:
    first, second, wrapper = Own("first"), Own("second", "other", "other_pred"), Wrapper()
    host = get_plugin_manager(entrypoints=False, plugins=[first, second, wrapper])
    request = CoderRequest(task_id="t", spec="s", workspace=tmp_path, mode_id="m", config={"k": 1})

    assert host.generate("own", request).summary == "first for own with {'k': 1}"
    assert host.generate("other", request).summary == "second for other with {'k': 1}"
    assert host.check_predicate("own_pred", _context(tmp_path), {"p": 2}).message == "first for own_pred with {'p': 2}"
    # each plugin was asked only for its own names, though it answers for any
    assert (first.asked, second.asked) == (["own", "own_pred"], ["other"])
    assert wrapper.seen == [("generate", "own"), ("generate", "other"), ("check_predicate", "own_pred")]


def test_no_answer_fails_closed(tmp_path: Path) -> None:
    class Silent(Own):
        @hookimpl
        def snodo_generate(self, name: str, request: CoderRequest) -> None:
            return None

        @hookimpl
        def snodo_check_predicate(self, name: str, context: PredicateContext, params: Any) -> None:
            return None

    host = get_plugin_manager(entrypoints=False, plugins=[Silent("silent")])
    request = CoderRequest(task_id="t", spec="s", workspace=tmp_path, mode_id="m")
    with pytest.raises(CoderError, match="coder 'own' gave no result"):
        host.generate("own", request)
    with pytest.raises(TypeError, match="predicate 'own_pred' returned NoneType"):
        host.check_predicate("own_pred", _context(tmp_path), {})


def test_a_registration_without_its_dispatch_hook_is_a_broken_plugin() -> None:
    class RegistersOnly:
        @hookimpl
        def snodo_coders(self):  # type: ignore[no-untyped-def]
            yield CoderSpec(name="lonely", description="d", capabilities=CAPS)

    host = get_plugin_manager(entrypoints=False, plugins=[RegistersOnly()])
    assert "lonely" not in host.coders()
    [(_who, error)] = host.failures()
    assert error == "registers 'lonely' in snodo_coders but implements no snodo_generate hook to answer for them"


def test_the_old_shape_is_refused_naming_the_new_one() -> None:
    with pytest.raises(TypeError, match=r"CoderSpec\(factory=\.\.\.\) is no longer supported.*snodo_generate"):
        CoderSpec(name="old", description="d", capabilities=CAPS, factory=lambda config: None)  # type: ignore[arg-type]
    with pytest.raises(
        TypeError, match=r"PredicateSpec\(check=\.\.\.\).*snodo_check_predicate\(name, context, params\)"
    ):
        PredicateSpec(name="old", description="d", check=lambda ctx, params: None)  # type: ignore[arg-type]

    class OldCoder:
        @hookimpl
        def snodo_coders(self):  # type: ignore[no-untyped-def]
            yield CoderSpec(name="old", description="d", capabilities=CAPS, factory=lambda config: None)  # type: ignore[arg-type]

    host = get_plugin_manager(entrypoints=False, plugins=[OldCoder()])
    [(_who, error)] = host.failures()
    assert "snodo_coders failed" in error and "implement the snodo_generate(name, request) hook" in error
