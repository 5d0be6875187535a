"""Every policy x severity mix, classified exactly as SPEC §3 orders it."""

from __future__ import annotations

import pytest

from snodo.governance.policy import ValidatorResult, cap, classify, required_passes
from snodo.rules.authorisation import authorisation_refusals


def results(*severities: str, kind: str = "validator") -> list[ValidatorResult]:
    return [
        ValidatorResult(
            validator_id=f"v{i}",
            validator_type="t",
            severity=s,
            justification=s,  # type: ignore[arg-type]
            error="boom" if s == "error" else None,
            kind=kind,
        )  # type: ignore[arg-type]
        for i, s in enumerate(severities)
    ]


TABLE = [
    # policy, severities, expected
    ("unanimous", ["pass", "pass", "pass"], "pass"),
    ("unanimous", ["pass", "pass", "warn"], "escalate"),
    ("unanimous", ["pass", "blocker", "pass"], "blocker"),
    ("unanimous", ["warn", "warn"], "escalate"),
    ("unanimous", ["pass"], "pass"),
    ("majority", ["pass", "pass", "warn"], "pass"),
    ("majority", ["pass", "warn", "warn"], "escalate"),
    ("majority", ["pass", "warn"], "escalate"),
    ("majority", ["pass", "pass"], "pass"),
    ("majority", ["pass", "pass", "blocker"], "blocker"),
    ("quorum", ["pass", "pass", "warn"], "pass"),  # ceil(2/3 * 3) = 2
    ("quorum", ["pass", "warn", "warn"], "escalate"),
    ("quorum", ["pass", "pass", "pass", "warn", "warn"], "escalate"),  # needs 4 of 5
    ("quorum", ["pass", "pass", "pass", "pass", "warn"], "pass"),
    ("any", ["pass", "warn", "warn"], "pass"),
    ("any", ["warn", "warn", "warn"], "escalate"),
    ("any", ["pass", "warn", "blocker"], "blocker"),
    ("any", ["pass", "error"], "validator_error"),
    ("unanimous", ["blocker", "error"], "blocker"),  # INV3: no other validator's error overrides a blocker
    ("majority", ["error", "pass", "pass"], "validator_error"),
    ("quorum", ["pass", "pass", "error"], "validator_error"),
]


@pytest.mark.parametrize(("policy", "severities", "expected"), TABLE)
def test_classification_table(policy: str, severities: list[str], expected: str) -> None:
    got = classify(results(*severities), policy=policy)
    assert got.status == expected, got.reason
    assert got.policy.total == len(severities)
    assert got.policy.pass_count == severities.count("pass")
    assert got.policy.warn_count == severities.count("warn")
    assert got.policy.blocker_count == severities.count("blocker")


def test_no_results_never_pass() -> None:
    got = classify([], policy="any")
    assert got.status == "validator_error"


@pytest.mark.parametrize(
    ("policy", "total", "threshold", "need"),
    [
        ("unanimous", 3, 0.5, 3),
        ("majority", 2, 0.5, 2),
        ("majority", 3, 0.5, 2),
        ("majority", 4, 0.5, 3),
        ("quorum", 3, 2 / 3, 2),
        ("quorum", 3, 0.66, 2),
        ("quorum", 5, 0.66, 4),
        ("quorum", 4, 0.5, 2),
        ("quorum", 1, 0.1, 1),
        ("any", 7, 0.5, 1),
    ],
)
def test_required_passes(policy: str, total: int, threshold: float, need: int) -> None:
    assert required_passes(policy, total, threshold) == need


def test_human_decision_counts_only_for_the_warn_it_adjudicated() -> None:
    rs = results("pass", "warn", "warn")
    assert classify(rs, policy="unanimous", adjudicated={"v1"}).status == "escalate"
    got = classify(rs, policy="unanimous", adjudicated={"v1", "v2"})
    assert got.status == "pass" and got.policy.adjudicated == ("v1", "v2")


def test_no_decision_overrides_a_blocker_inv3() -> None:
    rs = results("pass", "blocker")
    for policy in ("unanimous", "majority", "quorum", "any"):
        assert classify(rs, policy=policy, adjudicated={"v0", "v1"}).status == "blocker"


def test_constraints_veto_but_do_not_vote() -> None:
    votes = results("pass", "warn")
    passing_constraints = results("pass", "pass", "pass", kind="constraint")
    # Three passing constraints must not turn 1-of-2 into a quorum.
    assert classify([*votes, *passing_constraints], policy="quorum").status == "escalate"
    blocking = results("blocker", kind="constraint")
    assert classify([*results("pass", "pass"), *blocking], policy="any").status == "blocker"
    warning = results("warn", kind="constraint")
    assert classify([*results("pass"), *warning], policy="any").status == "escalate"


@pytest.mark.parametrize(
    ("severity", "cap_at", "expected"),
    [
        ("blocker", "warn", ("warn", "blocker")),
        ("blocker", "pass", ("pass", "blocker")),
        ("warn", "pass", ("pass", "warn")),
        ("pass", "warn", ("pass", None)),
        ("warn", "blocker", ("warn", None)),
        ("error", "pass", ("error", None)),
        ("blocker", None, ("blocker", None)),
    ],
)
def test_severity_cap_never_touches_errors(severity: str, cap_at: str | None, expected: tuple[str, str | None]) -> None:
    assert cap(severity, cap_at) == expected


# ------------------------------------------------------------------ INV3's one home


def test_authorisation_refusals_names_blockers_errors_and_unknown_severities() -> None:
    ok = {"name": "unanimous", "blocker_count": 0, "error_count": 0}
    assert (
        authorisation_refusals(
            [{"validator_id": "a", "severity": "pass"}, {"validator_id": "b", "severity": "warn"}], ok
        )
        == ()
    )
    assert authorisation_refusals([{"validator_id": "a", "severity": "blocker"}], ok) == ("a",)
    assert authorisation_refusals([{"validator_id": "a", "severity": "error"}], ok) == ("a",)
    assert authorisation_refusals([{"validator_id": "a", "severity": "pass", "error": "crashed"}], ok) == ("a",)
    assert authorisation_refusals([{"validator_id": "a", "severity": "PASS"}], ok) == ("a",)  # fail closed
    assert authorisation_refusals([{"validator_id": "a"}], ok) == ("a",)


@pytest.mark.parametrize(
    ("policy", "expected"),
    [
        ({"blocker_count": 2}, "the policy counted 2 blocker(s)"),
        ({"error_count": 1}, "the policy counted 1 validator error(s)"),
        ({"blocker_count": 1, "error_count": 1}, "the policy counted 1 blocker(s) and 1 validator error(s)"),
        ({"blocker_count": "lots"}, "the policy counted 1 blocker(s)"),  # unreadable counts as one
        ({"blocker_count": True}, "the policy counted 1 blocker(s)"),
        ({"blocker_count": -3}, "the policy counted 1 blocker(s)"),
    ],
)
def test_a_policy_count_alone_refuses(policy: dict[str, object], expected: str) -> None:
    assert authorisation_refusals([{"validator_id": "a", "severity": "warn"}], policy) == (expected,)


def test_inv3_has_one_home() -> None:
    """No module but ``governance/policy.py`` (which counts) and ``rules/authorisation.py`` (INV3, below
    state and governance) reads the policy's blocker/error counts or lists the severities a
    human may decide on; every door (MCP propose_adjudicate, `snodo authorize`,
    drafting, signing) goes through ``authorisation_refusals`` via ``check_inv3``."""
    import re
    from pathlib import Path

    import snodo

    root = Path(snodo.__file__).parent
    pattern = re.compile(r"blocker_count|error_count|\(\s*\"pass\",\s*\"warn\"\s*\)")
    offenders = sorted(
        p.relative_to(root).as_posix()
        for p in root.rglob("*.py")
        if p.relative_to(root).as_posix() not in ("governance/policy.py", "rules/authorisation.py")
        and pattern.search(p.read_text())
    )
    assert offenders == []
    host = (root / "mcp" / "host.py").read_text()
    assert "check_inv3(pending)" in host and "blocking_validators" not in host
