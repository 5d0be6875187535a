"""Property: any document either loads or is refused with a message — never a traceback."""

from __future__ import annotations

import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from snodo.base.errors import ProtocolError
from snodo.protocol import check, parse_protocol
from snodo.protocol.templates import template_text

FIELDS = [
    "protocol_id",
    "name",
    "version",
    "modes",
    "validators",
    "disagreement_policy",
    "quorum_threshold",
    "initial_mode",
    "roles",
    "global_constraints",
    "exclusive_tools",
    "protected_paths",
    "execution",
    "metadata",
    "mode_id",
    "tools",
    "transitions",
    "constraints",
    "coder",
    "coder_config",
    "validator_id",
    "validator_type",
    "evaluation_phase",
    "criteria",
    "tooling",
    "model",
    "severity_cap",
    "constraint_id",
    "predicate",
    "params",
    "severity",
    "to",
    "on",
    "max_iterations",
    "role_id",
    "bogus",
]
scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-5, 5),
    st.floats(allow_nan=False, allow_infinity=False),
    st.sampled_from(["read", "edit", "approve", "pytest", "pass", "warn", "unanimous", "quorum", "no", "x"]),
    st.text(max_size=8),
)
values = st.recursive(
    scalars,
    lambda inner: st.one_of(st.lists(inner, max_size=4), st.dictionaries(st.sampled_from(FIELDS), inner, max_size=5)),
    max_leaves=25,
)
documents = st.dictionaries(st.sampled_from(FIELDS), values, max_size=10)


def load_or_refuse(text: str) -> None:
    try:
        proto = parse_protocol(text, source="fuzz.yml")
    except ProtocolError as exc:
        assert str(exc).strip()
        assert all(p.startswith("fuzz.yml") for p in exc.problems)
    else:
        check(proto)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(documents)
def test_random_structures_load_or_are_refused(doc: dict) -> None:  # type: ignore[type-arg]
    load_or_refuse(yaml.safe_dump(doc))


@settings(max_examples=100, deadline=None)
@given(st.text(max_size=200))
def test_random_text_loads_or_is_refused(text: str) -> None:
    load_or_refuse(text)


@settings(max_examples=150, deadline=None)
@given(st.data())
def test_mutated_templates_load_or_are_refused(data: st.DataObject) -> None:
    base = yaml.safe_load(template_text(data.draw(st.sampled_from(["solo", "team", "2+n"]))))
    key = data.draw(st.sampled_from(sorted(base)))
    base[key] = data.draw(values)
    load_or_refuse(yaml.safe_dump(base))
