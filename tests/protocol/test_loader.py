"""Strict loading: unknown keys, wrong types and coercions are refused with file, line and path."""

from __future__ import annotations

from pathlib import Path

import pytest

from snodo.base.errors import ProtocolError
from snodo.protocol import parse_protocol, read_protocol_file
from snodo.protocol.templates import TEMPLATES, template_text

MINIMAL = """\
protocol_id: p
name: P
modes:
  - mode_id: producer
    tools: [read, edit]
    validators: [tests]
validators:
  - validator_id: tests
    validator_type: pytest
"""


def refused(text: str) -> ProtocolError:
    with pytest.raises(ProtocolError) as info:
        parse_protocol(text, source="proto.yml")
    return info.value


def test_minimal_protocol_loads_with_spec_defaults() -> None:
    p = parse_protocol(MINIMAL)
    assert p.version == "1.0.0"
    assert p.disagreement_policy == "unanimous"
    assert p.quorum_threshold == pytest.approx(2 / 3)
    assert p.start_mode == "producer"
    assert (p.execution.max_iterations, p.execution.max_recovery_depth, p.execution.max_total_fix_attempts) == (
        50,
        3,
        10,
    )
    assert p.modes[0].coder == "litellm"
    assert p.validators[0].evaluation_phase == "pre_execute"


@pytest.mark.parametrize("name", sorted(TEMPLATES))
def test_every_template_loads(name: str) -> None:
    parse_protocol(template_text(name), source=name)


def test_typo_key_names_key_line_and_path() -> None:
    err = refused(MINIMAL.replace("    validators: [tests]", "    validatorz: [tests]"))
    assert len(err.problems) == 1
    line = err.problems[0]
    assert line.startswith("proto.yml:6:")
    assert "unknown key 'validatorz'" in line and line.endswith("@ modes[0]")


def test_string_instead_of_list_is_not_split_into_characters() -> None:
    err = refused(MINIMAL.replace("tools: [read, edit]", "tools: edit"))
    assert err.problems == ("proto.yml:5: expected a list, got str 'edit' @ modes[0].tools",)


def test_yaml_syntax_error_is_one_line_with_position() -> None:
    err = refused(MINIMAL + "  bad: [unclosed\n")
    assert "YAML syntax error" in str(err)
    assert "proto.yml:" in err.message
    assert "\n" not in err.message


@pytest.mark.parametrize(
    ("replacement", "expected"),
    [
        ("execution: {max_iterations: 3.9}", "expected an integer, got float 3.9 @ execution.max_iterations"),
        ("execution: {max_iterations: '5'}", "expected an integer, got str '5' @ execution.max_iterations"),
        ("execution: {max_iterations: true}", "expected an integer, got bool True @ execution.max_iterations"),
        (
            "disagreement_policy: no",
            "expected one of: unanimous, majority, quorum, any; got 'no' @ disagreement_policy",
        ),
        ("disagreement_policy: sometimes", "expected one of: unanimous, majority, quorum, any"),
        ("quorum_threshold: '0.5'", "expected a number, got str '0.5' @ quorum_threshold"),
        ("protected_paths: [1]", "expected a string, got int 1 @ protected_paths[0]"),
    ],
)
def test_no_silent_coercion(replacement: str, expected: str) -> None:
    err = refused(MINIMAL + replacement + "\n")
    assert any(expected in p for p in err.problems), err.problems


def test_yes_no_on_off_are_strings_not_booleans() -> None:
    p = parse_protocol(MINIMAL + "metadata: {ci: no, on: yes, flag: true}\n")
    assert p.metadata == {"ci": "no", "on": "yes", "flag": True}


def test_all_schema_problems_are_reported_together() -> None:
    text = (
        MINIMAL.replace("tools: [read, edit]", "tools: edit").replace(
            "    validators: [tests]", "    validatorz: [tests]"
        )
        + "execution: {max_recovery_depth: x}\n"
    )
    err = refused(text)
    assert len(err.problems) == 3


def test_empty_modes_and_validators_are_refused() -> None:
    err = refused("protocol_id: p\nname: P\nmodes: []\nvalidators: []\n")
    assert [p.rsplit("@ ", 1)[1] for p in err.problems] == ["modes", "validators"]


def test_missing_required_field_is_named() -> None:
    err = refused(MINIMAL.replace("protocol_id: p\n", ""))
    assert any("'protocol_id'" in p and "missing" in p for p in err.problems)


def test_non_mapping_documents_are_refused() -> None:
    assert "must be a mapping" in refused("- a\n- b\n").message
    assert "empty document" in refused("").message


def test_quorum_threshold_must_be_a_fraction() -> None:
    err = refused(MINIMAL + "quorum_threshold: 2\n")
    assert "fraction" in str(err)


def test_missing_file_says_what_to_do(tmp_path: Path) -> None:
    with pytest.raises(ProtocolError) as info:
        read_protocol_file(tmp_path / ".snodo" / "protocol.yml")
    assert "snodo init" in str(info.value)


def test_anchors_and_merge_keys_still_load() -> None:
    """Reuse through anchors is fine; only a key written twice in one mapping is refused."""
    text = MINIMAL.replace(
        "validators:\n  - validator_id: tests\n    validator_type: pytest\n",
        "validators:\n"
        "  - &base {validator_id: tests, validator_type: pytest, tooling: {timeout: 30}}\n"
        "  - {<<: *base, validator_id: tests-again}\n",
    )
    p = parse_protocol(text)
    assert [(v.validator_id, v.timeout) for v in p.validators] == [("tests", 30.0), ("tests-again", 30.0)]


def test_duplicate_keys_at_any_level_are_all_reported_with_both_lines() -> None:
    text = MINIMAL + "name: Again\nexecution:\n  max_iterations: 3\n  max_iterations: 4\n"
    err = refused(text)
    assert err.problems == (
        "proto.yml:10: duplicate key 'name' (first at line 2); a key may appear only once in a mapping @ name",
        "proto.yml:13: duplicate key 'max_iterations' (first at line 12); a key may appear only once in a mapping "
        "@ execution.max_iterations",
    )


def test_deeper_than_the_parser_can_recurse_is_a_clean_error() -> None:
    err = refused(MINIMAL + "metadata: " + "[" * 5000 + "]" * 5000 + "\n")
    assert len(err.problems) == 1 and "nested too deeply" in err.problems[0]


def test_loaded_timeout_is_what_was_written() -> None:
    p = parse_protocol(MINIMAL.replace("validator_type: pytest", "validator_type: pytest\n    tooling: {timeout: 7.5}"))
    assert p.validators[0].timeout == 7.5
