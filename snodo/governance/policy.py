"""Policy and outcome classification (SPEC §3, ADR 015): verdicts in, exactly one outcome out.

Order matters and is the whole point: no results halt; any blocker is ``blocker`` (INV3:
nothing overrides it — no policy, no human decision, no other validator's error); any error
is ``validator_error``; a result a person must see (``escalate``: a change to the tests or
their harness) is ``escalate`` whatever the policy; only then does the policy threshold on
``pass`` decide between ``pass`` and ``escalate``.
A ``warn`` withholds approval unless a verified human decision adjudicated that very
validator for this task and spec.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from typing import Any, Literal

from attrs import Factory

from snodo.attrsbase import frozen

# INV3 lives below state and governance (both ask it); re-exported for the governance doors
from snodo.rules.authorisation import authorisation_refusals as authorisation_refusals  # noqa: PLC0414
from snodo.rules.outcomes import Outcome

ResultSeverity = Literal["pass", "warn", "blocker", "error"]
Status = Outcome  # the four outcomes, named once in snodo/rules/outcomes.py
SEVERITY_ORDER: dict[str, int] = {"pass": 0, "warn": 1, "blocker": 2}


@frozen(kw_only=True)
class ValidatorResult:
    """One validator's (or constraint's) result as the runner reports it.

    ``severity_original`` is set when ``severity_cap`` lowered the verdict.
    ``kind`` is ``validator`` (votes under the policy) or ``constraint`` (a veto only).
    """

    validator_id: str
    validator_type: str
    severity: ResultSeverity
    justification: str
    error: str | None = None
    severity_original: str | None = None
    kind: Literal["validator", "constraint"] = "validator"
    details: Mapping[str, Any] = Factory(dict)
    duration: float = 0.0
    #: a person must look whatever the policy says (see :attr:`snodo.plugin.records.Verdict.escalate`)
    escalate: bool = False

    def as_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "validator_id": self.validator_id,
            "validator_type": self.validator_type,
            "severity": self.severity,
            "justification": self.justification,
            "error": self.error,
        }
        if self.severity_original is not None:
            out["severity_original"] = self.severity_original
        if self.kind != "validator":
            out["kind"] = self.kind
        if self.escalate:
            out["escalate"] = True
        if self.details:
            out["details"] = dict(self.details)
        return out

    def for_agent(self) -> dict[str, Any]:
        """:meth:`as_json` without what only a person and the audit log may see (the
        ``private`` details: held-out test ids and messages)."""
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
        return {
            "name": self.name,
            "pass_count": self.pass_count,
            "warn_count": self.warn_count,
            "blocker_count": self.blocker_count,
            "total": self.total,
            "required": self.required,
            "error_count": self.error_count,
            "adjudicated": list(self.adjudicated),
        }


@frozen(kw_only=True)
class Classification:
    status: Status
    policy: PolicySummary
    reason: str


def cap(severity: str, cap_at: str | None) -> tuple[str, str | None]:
    """Lower ``severity`` to ``cap_at``; returns (new, original-if-changed). Errors are never capped."""
    if cap_at is None or severity not in SEVERITY_ORDER:
        return severity, None
    if SEVERITY_ORDER[severity] > SEVERITY_ORDER[cap_at]:
        return cap_at, severity
    return severity, None


def required_passes(policy: str, total: int, quorum_threshold: float) -> int:
    if policy == "unanimous":
        return total
    if policy == "majority":
        return total // 2 + 1
    if policy == "quorum":
        # A product within 1e-9 of an integer is that integer (float noise, not intent).
        raw = quorum_threshold * total
        return max(1, math.ceil(raw - 1e-9))
    if policy == "any":
        return 1 if total else 0
    raise ValueError(f"unknown disagreement_policy {policy!r}")


def classify(
    results: Sequence[ValidatorResult],
    *,
    policy: str,
    quorum_threshold: float = 2 / 3,
    adjudicated: Iterable[str] = (),
) -> Classification:
    """Turn results into exactly one outcome; the policy counts only ``validator`` results."""
    adjudicated_set = frozenset(adjudicated)
    votes = [r for r in results if r.kind == "validator"]
    used: list[str] = []
    passes = warns = blockers = errors = 0
    for r in votes:
        if r.severity == "error":
            errors += 1
        elif r.severity == "blocker":
            blockers += 1
        elif r.severity == "warn":
            if r.validator_id in adjudicated_set:
                passes += 1
                used.append(r.validator_id)
            else:
                warns += 1
        else:
            passes += 1
    total = len(votes)
    required = required_passes(policy, total, quorum_threshold) if total else 0

    def summary() -> PolicySummary:
        return PolicySummary(
            name=policy,
            pass_count=passes,
            warn_count=warns,
            blocker_count=blockers,
            total=total,
            required=required,
            error_count=errors,
            adjudicated=tuple(used),
        )

    if not results:
        return Classification(
            status="validator_error",
            policy=summary(),
            reason="no validator produced a result for this phase; nothing proves the work",
        )
    if any(r.severity == "blocker" for r in results):
        failed = ", ".join(r.validator_id for r in results if r.severity == "blocker")
        return Classification(status="blocker", policy=summary(), reason=f"blocked by: {failed}")
    if any(r.severity == "error" for r in results):
        failed = ", ".join(r.validator_id for r in results if r.severity == "error")
        return Classification(status="validator_error", policy=summary(), reason=f"could not judge: {failed}")
    shown = [r.validator_id for r in results if r.escalate and r.validator_id not in adjudicated_set]
    if shown:
        return Classification(
            status="escalate",
            policy=summary(),
            reason="a person must see what the change does to the tests or their harness: " + ", ".join(shown),
        )
    vetoes = [
        r for r in results if r.kind == "constraint" and r.severity == "warn" and r.validator_id not in adjudicated_set
    ]
    if vetoes:
        return Classification(
            status="escalate",
            policy=summary(),
            reason="constraint warning needs a human: " + ", ".join(r.validator_id for r in vetoes),
        )
    if total == 0:
        return Classification(
            status="validator_error", policy=summary(), reason="only constraints ran; no validator judged this phase"
        )
    if passes >= required:
        return Classification(
            status="pass", policy=summary(), reason=f"{passes} of {total} passed ({policy} needs {required})"
        )
    return Classification(
        status="escalate",
        policy=summary(),
        reason=f"{passes} of {total} passed, {policy} needs {required}; a human must decide",
    )
