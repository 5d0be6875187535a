"""Policy and outcome classification (SPEC §3, ADR 015): verdicts in, exactly one outcome
out, by the ladder in :func:`classify`, whose order is the point: a blocker is never
overridden (INV3: no policy, no human decision, no other validator's error). A ``warn``
withholds approval unless a verified human decision adjudicated that very validator.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any, Literal

from attrs import Factory, asdict, frozen

from snodo.rules.outcomes import Outcome

ResultSeverity = Literal["pass", "warn", "blocker", "error"]
SEVERITY_ORDER: dict[str, int] = {"pass": 0, "warn": 1, "blocker": 2}
_ALWAYS = frozenset({"validator_id", "validator_type", "severity", "justification", "error"})


@frozen(kw_only=True)
class ValidatorResult:
    """One validator's (or constraint's: it only vetoes) result; ``severity_original``: before ``severity_cap``."""

    validator_id: str
    validator_type: str
    severity: ResultSeverity
    justification: str
    error: str | None = None
    severity_original: str | None = None
    kind: Literal["validator", "constraint"] = "validator"
    escalate: bool = False  # a person must look whatever the policy says (as Verdict.escalate)
    details: Mapping[str, Any] = Factory(dict)
    duration: float = 0.0

    def as_json(self) -> dict[str, Any]:
        """Every field but the duration; the optional ones only when set."""
        return asdict(self, filter=lambda a, v: a.name in _ALWAYS or (a.name != "duration" and v != a.default and v))

    def for_agent(self) -> dict[str, Any]:
        """:meth:`as_json` without the ``private`` details (held-out test ids and messages)."""
        out = self.as_json()
        if "details" in out and "private" in out["details"]:
            out["details"] = {k: v for k, v in out["details"].items() if k != "private"}
        return out


@frozen(kw_only=True)
class PolicySummary:
    name: str
    pass_count: int
    warn_count: int
    blocker_count: int
    total: int
    required: int
    error_count: int = 0
    adjudicated: tuple[str, ...] = ()

    def as_json(self) -> dict[str, Any]:
        return asdict(self)


@frozen(kw_only=True)
class Classification:
    status: Outcome
    policy: PolicySummary
    reason: str


def cap(severity: str, cap_at: str | None) -> tuple[str, str | None]:
    """Lower ``severity`` to ``cap_at``; returns (new, original-if-changed). Errors are never capped."""
    if cap_at is not None and SEVERITY_ORDER.get(severity, -1) > SEVERITY_ORDER[cap_at]:
        return cap_at, severity
    return severity, None


def required_passes(policy: str, total: int, quorum_threshold: float) -> int:
    if policy == "unanimous":
        return total
    if policy == "majority":
        return total // 2 + 1
    if policy == "quorum":
        return max(1, math.ceil(quorum_threshold * total - 1e-9))  # within 1e-9 of an integer: float noise
    if policy == "any":
        return 1 if total else 0
    raise ValueError(f"unknown disagreement_policy {policy!r}")


def _count(
    results: Sequence[ValidatorResult], policy: str, quorum_threshold: float, decided: frozenset[str]
) -> PolicySummary:
    """The policy's tally of the ``validator`` results (an adjudicated warning counts as a pass)."""
    votes = [r for r in results if r.kind == "validator"]
    counts = Counter(r.severity for r in votes)
    used = tuple(r.validator_id for r in votes if r.severity == "warn" and r.validator_id in decided)
    return PolicySummary(
        name=policy,
        pass_count=counts["pass"] + len(used),
        warn_count=counts["warn"] - len(used),
        blocker_count=counts["blocker"],
        total=len(votes),
        required=required_passes(policy, len(votes), quorum_threshold) if votes else 0,
        error_count=counts["error"],
        adjudicated=used,
    )


def _who(results: Sequence[ValidatorResult], keep: Callable[[ValidatorResult], bool]) -> list[str]:
    return [r.validator_id for r in results if keep(r)]


def classify(
    results: Sequence[ValidatorResult], *, policy: str, quorum_threshold: float = 2 / 3, adjudicated: Iterable[str] = ()
) -> Classification:
    """Turn results into exactly one outcome; the policy counts only ``validator`` results."""
    decided = frozenset(adjudicated)
    summary = _count(results, policy, quorum_threshold, decided)
    passes, total, required = summary.pass_count, summary.total, summary.required
    blocked = _who(results, lambda r: r.severity == "blocker")
    failed = _who(results, lambda r: r.severity == "error")
    shown = _who(results, lambda r: r.escalate and r.validator_id not in decided)
    vetoes = _who(results, lambda r: r.kind == "constraint" and r.severity == "warn" and r.validator_id not in decided)
    ladder: list[tuple[object, Outcome, str]] = [
        (not results, "validator_error", "no validator produced a result for this phase; nothing proves the work"),
        (blocked, "blocker", f"blocked by: {', '.join(blocked)}"),
        (failed, "validator_error", f"could not judge: {', '.join(failed)}"),
        (
            shown,
            "escalate",
            f"a person must see what the change does to the tests or their harness: {', '.join(shown)}",
        ),
        (vetoes, "escalate", f"constraint warning needs a human: {', '.join(vetoes)}"),
        (total == 0, "validator_error", "only constraints ran; no validator judged this phase"),
        (passes >= required, "pass", f"{passes} of {total} passed ({policy} needs {required})"),
        (True, "escalate", f"{passes} of {total} passed, {policy} needs {required}; a human must decide"),
    ]
    status, reason = next((status, reason) for holds, status, reason in ladder if holds)
    return Classification(status=status, policy=summary, reason=reason)
