"""WF1–WF5 and known capabilities: every violation reported at once, naming rule and culprits."""

from __future__ import annotations

import pytest

from snodo.api import CoderCapabilities, CoderResult, CoderSpec, PredicateResult, PredicateSpec, ValidatorSpec, hookimpl
from snodo.base.errors import ProtocolError
from snodo.plugin.host import get_plugin_manager
from snodo.protocol import check, parse_protocol


class _Coder:
    def __init__(self, config: object) -> None:
        self.config = config

    def generate(self, request: object) -> CoderResult:
        return CoderResult()


class FixturePlugin:
    """A real plugin object registering the types the protocols below name."""

    @hookimpl
    def snodo_validators(self):  # type: ignore[no-untyped-def]
        yield ValidatorSpec(name="pytest", description="t")
        yield ValidatorSpec(name="acceptance", description="a")

    @hookimpl
    def snodo_coders(self):  # type: ignore[no-untyped-def]
        yield CoderSpec(
            name="mock",
            description="m",
            capabilities=CoderCapabilities(writes_in_place=False, commits_own_changes=False),
        )

    @hookimpl
    def snodo_generate(self, name, request):  # type: ignore[no-untyped-def]
        return _Coder({}).generate(request)

    @hookimpl
    def snodo_validate(self, name, request):  # type: ignore[no-untyped-def]
        return None

    @hookimpl
    def snodo_check_predicate(self, name, context, params):  # type: ignore[no-untyped-def]
        return PredicateResult(ok=True, message="ok")

    @hookimpl
    def snodo_predicates(self):  # type: ignore[no-untyped-def]
        yield PredicateSpec(name="no_secrets_in_diff", description="n")


@pytest.fixture
def host():  # type: ignore[no-untyped-def]
    return get_plugin_manager(entrypoints=False, plugins=[FixturePlugin()])


BROKEN = """\
protocol_id: broken
name: Broken on purpose
disagreement_policy: majority
modes:
  - mode_id: producer
    tools: [read, edit, approve, dispatch]
    validators: [tests, ghost]
    coder: mock
    constraints:
      - {constraint_id: c1, predicate: no_such_predicate}
  - mode_id: reviewer
    tools: [review, approve]
    validators: [tests]
    coder: mock
validators:
  - validator_id: tests
    validator_type: pytest
"""


def rules(violations: list) -> list[str]:  # type: ignore[type-arg]
    return sorted({v.rule for v in violations if v.level == "error"})


def test_issue_example_reports_all_four_violations_together(host) -> None:  # type: ignore[no-untyped-def]
    violations = check(parse_protocol(BROKEN), host)
    text = "\n".join(map(str, violations))
    assert {"WF1", "WF3", "WF4", "WF5"} <= set(rules(violations))
    assert "'approve' is held by 2 modes: producer, reviewer" in text
    assert "mode 'producer' names validator 'ghost'" in text
    assert "'majority' needs at least 2 validators, the protocol declares 1" in text
    assert "constraint 'c1'" in text and "unknown predicate 'no_such_predicate'" in text


def test_dispatching_mode_needs_a_pre_execute_validator(host) -> None:  # type: ignore[no-untyped-def]
    p = parse_protocol(
        BROKEN.replace("validator_type: pytest", "validator_type: pytest\n    evaluation_phase: post_execute")
    )
    assert "mode 'producer' holds 'dispatch' but has no pre_execute validator" in "\n".join(map(str, check(p, host)))


def test_unknown_capability_lists_the_known_ones(host) -> None:  # type: ignore[no-untyped-def]
    p = parse_protocol(BROKEN.replace("tools: [review, approve]", "tools: [review, fly]"))
    msgs = [str(v) for v in check(p, host) if v.rule == "CAP"]
    assert len(msgs) == 1 and "'fly'" in msgs[0] and "modes[1].tools[1]" in msgs[0] and "read" in msgs[0]


def test_missing_plugins_are_named(host) -> None:  # type: ignore[no-untyped-def]
    p = parse_protocol(
        BROKEN.replace("validator_type: pytest", "validator_type: ruff-gate").replace(
            "coder: mock\n    constraints", "coder: aider\n    constraints"
        )
    )
    text = "\n".join(str(v) for v in check(p, host) if v.rule == "WF3")
    assert "no validator type named 'ruff-gate' is installed" in text
    assert "no coder named 'aider' is installed" in text


def test_quorum_with_few_validators_only_warns(host) -> None:  # type: ignore[no-untyped-def]
    good = (
        BROKEN.replace("disagreement_policy: majority", "disagreement_policy: quorum")
        .replace("approve, dispatch", "dispatch")
        .replace("validators: [tests, ghost]", "validators: [tests]")
        .replace("predicate: no_such_predicate", "predicate: no_secrets_in_diff")
        .replace(
            "validators: [tests]\n    coder: mock\nvalidators:", "validators: [tests]\n    coder: mock\nvalidators:"
        )
        .replace(
            "validator_type: pytest",
            "validator_type: pytest\n    evaluation_phase: post_execute\n"
            "  - validator_id: criteria\n    validator_type: acceptance",
        )
        .replace(
            "validators: [tests]\n    coder: mock\n    constraints",
            "validators: [criteria, tests]\n    coder: mock\n    constraints",
        )
    )
    violations = check(parse_protocol(good), host)
    assert [v.rule for v in violations] == ["WF4"] and violations[0].level == "warning"


def test_duplicate_roles_and_constraints(host) -> None:  # type: ignore[no-untyped-def]
    text = (
        BROKEN
        + "roles:\n  - {role_id: dev}\n  - {role_id: dev, modes: [nobody]}\n"
        + "global_constraints:\n  - {constraint_id: c1, predicate: no_secrets_in_diff}\n"
    )
    out = "\n".join(map(str, check(parse_protocol(text), host)))
    assert "WF2: role_id 'dev' is declared more than once" in out
    assert "WF2: role 'dev' names unknown mode 'nobody'" in out
    assert "WF5: constraint_id 'c1' is declared more than once" in out


def test_exclusive_tools_extend_wf1(host) -> None:  # type: ignore[no-untyped-def]
    text = (
        BROKEN.replace("tools: [review, approve]", "tools: [review, commit]").replace(
            "read, edit, approve, dispatch", "read, edit, commit"
        )
        + "exclusive_tools: [commit]\n"
    )
    out = [str(v) for v in check(parse_protocol(text), host) if v.rule == "WF1"]
    assert out == [
        "WF1: exclusive capability 'commit' is held by 2 modes: producer, reviewer (at most one mode may hold it)"
    ]


def test_load_protocol_refuses_on_errors(tmp_path, host) -> None:  # type: ignore[no-untyped-def]
    from snodo.protocol import load_protocol

    path = tmp_path / "protocol.yml"
    path.write_text(BROKEN)
    with pytest.raises(ProtocolError) as info:
        load_protocol(path, host)
    assert len(info.value.problems) == 5
    assert [p.split(":")[0] for p in info.value.problems] == ["WF1", "WF3", "WF3", "WF4", "WF5"]
    assert "has no post_execute validator" in info.value.problems[2]


def test_checking_a_file_parses_its_yaml_once(tmp_path, host, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    """Loading and `protocol check` locate each violation in the tree the strict parse composed."""
    from snodo.protocol import check_file, load_protocol, yamldoc

    composed: list[str] = []
    real = yamldoc.compose

    def counting(text: str, source: str, max_bytes: int):  # type: ignore[no-untyped-def]
        composed.append(source)
        return real(text, source, max_bytes)

    monkeypatch.setattr(yamldoc, "compose", counting)
    path = tmp_path / "protocol.yml"
    path.write_text(BROKEN.replace("tools: [review, approve]", "tools: [review, approve, reed]"))
    _, violations = check_file(path, host)
    assert composed == [str(path)]
    assert [v.message.split(" grants")[0] for v in violations if v.rule == "CAP"] == [f"{path}:12: mode 'reviewer'"]
    with pytest.raises(ProtocolError):
        load_protocol(path, host)
    assert composed == [str(path)] * 2


def test_sandbox_off_is_a_warning_not_an_error(host) -> None:  # type: ignore[no-untyped-def]
    text = BROKEN + "execution: {sandbox: 'off'}\n"
    found = [v for v in check(parse_protocol(text), host) if v.rule == "EXEC"]
    assert [(v.level, v.message) for v in found] == [
        (
            "warning",
            "execution.sandbox is 'off': tests, validator commands and in-place coders will run agent-written "
            "code unconfined, with your user's full access; each such run is audited (see docs/security.md)",
        )
    ]


def test_protocol_check_prints_the_sandbox_warning(tmp_path, snodo_cli) -> None:  # type: ignore[no-untyped-def]
    from snodo.protocol.templates import template_text

    (tmp_path / ".snodo").mkdir()
    (tmp_path / ".snodo" / "protocol.yml").write_text(template_text("solo") + "  sandbox: 'off'\n")
    r = snodo_cli("protocol", "check", cwd=tmp_path)
    assert r.returncode == 0, r
    assert "warning: EXEC (warning): execution.sandbox is 'off'" in r.stderr
