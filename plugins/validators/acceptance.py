"""The ``acceptance`` validator: is the task done by its own stated criteria?

Before the work (``pre_execute``) it asks whether each criterion can be checked at all;
after it (``post_execute``) it checks them against the tree. Criteria in the fixed shapes
of :mod:`._criteria` are checked mechanically and a failed one is a blocker. Prose is
judged by ``validator.model`` when one is set. With no model, a person judges it, once a
task and after the work, where there is something to look at: ``post_execute`` reports it
"not verified", a warn (an unchecked promise must reach a human rather than pass silently);
``pre_execute`` leaves it "not judged before the work" and says so, adding nothing to the
verdict (a spec of prose alone passes there with nothing judged, as one with no criteria) —
when an ``acceptance`` validator of the mode will judge it after the work; if none will,
``pre_execute`` is the one chance and reports it "not verified" there.

Tooling: ``command``, ``python`` and ``pythonpath`` (the test run behind "tests pass", as
for the pytest validator), ``timeout``, and for the model judging the prose criteria the
provider settings every model plugin shares (``api_base``, ``api_key_env``, ``max_retries``,
``temperature``, ``stream``; docs/providers.md) and ``mock_response`` — for offline tests and
demos only: litellm's canned reply. The model's usage is in the verdict's details.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from snodo.api import Setting, Severity, ValidationRequest, Validator, ValidatorSpec, Verdict, hookimpl

from .. import _files
from . import _criteria, _judging, _testrun, _tooling

NAME = "acceptance"
SETTINGS = (
    Setting("command", "command"),
    Setting("python", "text"),
    Setting("pythonpath", "paths"),
    *_judging.JUDGE_SETTINGS,
)

MET, FAILED, UNVERIFIED, CHECKABLE = "met", "failed", "not verified", "checkable"
DEFERRED = "not judged before the work"
_SEVERITY: dict[str, Severity] = {
    MET: "pass",
    CHECKABLE: "pass",
    DEFERRED: "pass",
    UNVERIFIED: "warn",
    FAILED: "blocker",
}
_RANK = {"pass": 0, "warn": 1, "blocker": 2}

_SYSTEM_PRE = (
    "You review acceptance criteria before any work is done. Judge whether each criterion is "
    "clear and verifiable for this task: blocker if one contradicts the task or cannot be met, "
    "warn if one is too vague to verify."
)
_SYSTEM_POST = (
    "You check finished work against its acceptance criteria, using the task and the changed "
    "files shown. Judge only these criteria: blocker if one is not met, warn if you cannot tell."
)


@hookimpl
def snodo_validators() -> Iterator[ValidatorSpec]:
    yield ValidatorSpec(
        name=NAME,
        description="checks the spec's acceptance criteria (mechanical shapes; prose by an optional model)",
        needs_model=False,
        deterministic=False,  # deterministic unless `model` judges the prose criteria
        settings=SETTINGS,
    )


def _row(criterion: _criteria.Criterion, status: str, reason: str) -> dict[str, str]:
    return {"criterion": criterion.text, "source": criterion.source, "status": status, "reason": reason}


def _check(request: ValidationRequest, tooling: dict[str, Any], check: _criteria.Check) -> tuple[str, str]:
    root = request.workspace
    if check.kind == "exists":
        found = _criteria.exists(root, check.target)
        return (MET, f"{check.target} exists") if found else (FAILED, f"{check.target} not found")
    if check.kind == "absent":
        found = _criteria.exists(root, check.target)
        return (FAILED, f"{check.target} still exists") if found else (MET, f"{check.target} is absent")
    if check.kind == "defined":
        site = _criteria.definition_site(root, check.target, check.file)
        where = f" in {check.file}" if check.file else " in any Python file"
        return (MET, f"{check.target} is defined in {site}") if site else (FAILED, f"{check.target} not defined{where}")
    verdict = _testrun.judged_verdict(request, _testrun.shared_tooling(request, tooling))
    if verdict.severity == "pass":
        return MET, verdict.justification
    if verdict.escalate:
        return UNVERIFIED, f"the tests' judgement needs a person: {verdict.justification}"
    return FAILED, verdict.justification


def _judge_prose(
    request: ValidationRequest, tooling: dict[str, Any], prose: list[_criteria.Criterion], post: bool
) -> tuple[str, str, dict[str, Any]]:
    """One model verdict over all prose criteria: a (status, reason) for each, and its usage."""
    if request.validator.model is None:
        if not post and _judged_after(request, prose):  # one question a task, when the work can be seen
            return DEFERRED, "prose criterion and no model configured: a person judges it after the work", {}
        return UNVERIFIED, "prose criterion and no model configured to judge it", {}
    lines = [f"Task:\n{request.task_spec.strip()}", "Criteria:\n" + "\n".join(f"- {c.text}" for c in prose)]
    if post:
        lines.append("Changed files:\n" + _files.changed_contents(request.workspace, request.changed_files))
    system = _SYSTEM_POST if post else _SYSTEM_PRE
    verdict = _judging.judge(request, tooling, system=system, prompt="\n\n".join(lines))
    status = {"pass": MET if post else CHECKABLE, "warn": UNVERIFIED, "blocker": FAILED}[verdict.severity]
    return status, f"model {request.validator.model}: {verdict.justification}", dict(verdict.details)


def _judged_after(request: ValidationRequest, prose: list[_criteria.Criterion]) -> bool:
    """Whether an ``acceptance`` validator of this mode judges every one of ``prose`` after the
    work: only then may the question wait for it (else this is the one chance a person sees it)."""
    after = [
        v
        for v in (request.protocol.validator(vid) for vid in request.mode.validators)
        if v is not None and v.validator_type == NAME and v.evaluation_phase == "post_execute"
    ]
    later = {c.strip() for v in after for c in v.criteria}
    return bool(after) and all(c.source == "spec" or c.text in later for c in prose)


@hookimpl
def snodo_validate(name: str, request: ValidationRequest) -> Verdict | None:
    if name != NAME:
        return None
    tooling = _tooling.checked(request, SETTINGS)
    criteria = _criteria.gather(request.validator.criteria, request.task_spec)
    if not criteria:
        return Verdict(
            severity="pass",
            justification="no acceptance criteria stated; nothing to check",
            details={"criteria": []},
        )
    post = request.phase == "post_execute"
    checks = [_criteria.classify(c.text) for c in criteria]
    prose = [c for c, check in zip(criteria, checks, strict=True) if check is None]
    status, reason, judged = _judge_prose(request, tooling, prose, post) if prose else (UNVERIFIED, "", {})
    rows = []
    for criterion, check in zip(criteria, checks, strict=True):
        if check is None:
            rows.append(_row(criterion, status, reason))
        elif post:
            rows.append(_row(criterion, *_check(request, tooling, check)))
        else:
            rows.append(_row(criterion, CHECKABLE, f"checked after the work ({check.kind})"))
    severity = max((_SEVERITY[r["status"]] for r in rows), key=_RANK.__getitem__)
    return Verdict(severity=severity, justification=_summary(rows, post), details={"criteria": rows, **judged})


@hookimpl
def snodo_preflight(validators: tuple[Validator, ...]) -> None:
    _judging.preflight(validators, NAME)


def _summary(rows: list[dict[str, str]], post: bool) -> str:
    good = MET if post else CHECKABLE
    parts = [f"{sum(r['status'] == good for r in rows)} of {len(rows)} criteria {good}"]
    for status in (FAILED, UNVERIFIED, DEFERRED):
        bad = [f"{r['criterion']} ({r['reason']})" for r in rows if r["status"] == status]
        if bad:
            parts.append(f"{status}: " + "; ".join(bad))
    return ". ".join(parts)
