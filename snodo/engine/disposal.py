"""A halted run's work: kept under ``refs/snodo/halted/…``, or thrown away when a failed
constraint's predicate declares ``discard_work_on_failure`` (``no_secrets_in_diff``). Commits
such a constraint never judged are judged first, so no kept ref holds what it forbids."""

from __future__ import annotations

from typing import Any

from snodo.base.errors import SnodoError
from snodo.engine import change
from snodo.engine.results import Progress
from snodo.engine.worktree import Worktree
from snodo.governance.runner import PhaseInput, constraints_for, run_constraints
from snodo.governance.service import Project


def dispose(
    p: Project,
    wt: Worktree | None,
    results: tuple[dict[str, Any], ...],
    files: tuple[str, ...],
    spec_text: str,
    progress: Progress,
) -> tuple[str | None, dict[str, Any] | None]:
    """Keep a halted run's commits, or throw them away; (ref, discarded)."""
    if wt is None:
        return None, None
    reasons = discard_reasons(p, results)
    if not reasons:
        try:
            reasons = judge_unjudged(p, wt, results, spec_text)
        except SnodoError as exc:  # fail closed: work that cannot be judged is not kept
            reasons = [{"constraint": "-", "predicate": "-", "finding": f"could not be judged: {exc}"}]
    if not reasons:
        try:
            ref = wt.keep_halted()
        except SnodoError as exc:
            progress(f"could not keep the halted run's commits: {exc}")
            return None, None
        if ref:
            progress(f"the halted run's commits are kept at {ref}")
        return ref, None
    try:
        done = wt.discard()
    except SnodoError as exc:  # the working copy is gone; say what could not be done
        done = {"error": str(exc)}
    discarded = {
        "reason": "a constraint whose failure means the work must not be kept failed",
        "constraints": reasons,
        "files": list(files),
        **done,
    }
    p.record("work_discarded", task_id=wt.task_id, run_id=wt.run_id, **discarded)
    progress(f"the run's work was discarded: {'; '.join(r['finding'] for r in reasons)[:300]}")
    return None, discarded


def _discarding(p: Project, predicate: str) -> str | None:
    try:
        spec = p.host.predicate(predicate)
    except SnodoError:
        return None
    return spec.name if spec.discard_work_on_failure else None


def discard_reasons(p: Project, results: tuple[dict[str, Any], ...]) -> list[dict[str, str]]:
    """Failed constraints (an error counts as failed) whose predicate declares ``discard_work_on_failure``."""
    reasons = []
    for r in results:
        vtype = str(r.get("validator_type", ""))
        if r.get("kind") != "constraint" or r.get("severity") == "pass" or not vtype.startswith("predicate:"):
            continue
        if name := _discarding(p, vtype.removeprefix("predicate:")):
            reasons.append(
                {"constraint": str(r.get("validator_id")), "predicate": name, "finding": str(r.get("justification"))}
            )
    return reasons


def judge_unjudged(
    p: Project, wt: Worktree, results: tuple[dict[str, Any], ...], spec_text: str
) -> list[dict[str, str]]:
    """Judge now the commits about to be kept that a discarding constraint never judged (an
    interrupted run, a halt before post_execute finished); a predicate that cannot judge
    fails closed."""
    tip = wt.tip()
    if tip is None or tip == wt.base:
        return []
    judged = {str(r.get("validator_id")) for r in results}
    pending = {}
    for c in constraints_for(p.protocol, p.mode, p.protocol.validators_for(p.mode, "post_execute")):
        name = _discarding(p, c.predicate) if f"constraint:{c.constraint_id}" not in judged else None
        if name:
            pending[f"constraint:{c.constraint_id}"] = (c, name)
    if not pending:
        return []
    changed, diff = change.compare(wt.path, wt.base, tip)
    inp = PhaseInput(
        protocol=p.protocol,
        mode=p.mode,
        phase="post_execute",
        task_id=wt.task_id,
        task_spec=spec_text,
        workspace=wt.path,
        changed_files=changed,
        diff=diff,
        sandbox=p.sandbox_policy(wt.path),
    )
    verdicts = run_constraints(p.host, [c for c, _ in pending.values()], inp)
    return [
        {"constraint": v.validator_id, "predicate": pending[v.validator_id][1], "finding": v.justification}
        for v in verdicts
        if v.severity != "pass"
    ]
