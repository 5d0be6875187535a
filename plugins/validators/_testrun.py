"""A verdict from the project's tests, as snodo's judge reaches it (docs/judging.md).

The pytest validator and the acceptance criterion "tests pass" share this, and through
:func:`snodo.api.judge_tests` one judgement of the same tree: validators of one phase that
need test results ask with the same settings (the mode's pytest validator's, when it has
one) and so share one run.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from snodo.api import TestJudgement, ValidationRequest, Verdict, judge_tests


def judged_verdict(request: ValidationRequest, tooling: Mapping[str, Any], *, timeout: float | None = None) -> Verdict:
    """The judgement of the request's work as a verdict. Details a person sees but the agent
    must not (held-out test ids and messages) are under ``private``."""
    judged: TestJudgement = judge_tests(request, tooling, timeout=timeout)
    details: dict[str, Any] = dict(judged.details)
    dirty = request.status.uncommitted() if request.status is not None else ()
    if dirty:  # judged as a snapshot; listed so a person knows the checkout had uncommitted work
        details["dirty_tree"] = list(dirty)
    if judged.private:
        details["private"] = dict(judged.private)
    return Verdict(
        severity=judged.severity,  # type: ignore[arg-type]
        justification=judged.justification,
        details=details,
        escalate=judged.escalate,
    )


def shared_tooling(request: ValidationRequest, own: Mapping[str, Any]) -> dict[str, Any]:
    """The settings to judge the tests with: the phase's pytest validator's when the mode has
    one (so both ask for the same judgement), else ``own``."""
    found = TestJudgement.pytest_tooling(request.protocol.validators_for(request.mode, request.phase))
    if found:
        return found
    return {k: v for k, v in own.items() if k in ("command", "python", "pythonpath")}
