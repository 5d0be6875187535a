"""What a run ends with: its result (the payload every front door prints), or the halt
that stops it (snodo/rules/outcomes.py)."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any, Literal

from attrs import asdict, frozen

from snodo.base.errors import CoderError, EnvironmentProblem, PluginError, SnodoError
from snodo.governance.policy import ValidatorResult
from snodo.governance.service import ValidationOutcome
from snodo.rules.outcomes import RUN_NEXT_STEP, HaltOutcome

Progress = Callable[[str], None]


RunStatus = Literal["completed", "halted"]


@frozen(kw_only=True)
class RunResult:
    """What a run ended with; the fields in the order its payload shows them."""

    status: RunStatus
    outcome: HaltOutcome | None = None
    task_id: str
    job_id: str | None = None
    phase: str | None = None
    message: str = ""
    branch: str | None = None
    commit: str | None = None
    decision_id: str | None = None
    files: tuple[str, ...] = ()
    attempts: int = 0
    results: tuple[dict[str, Any], ...] = ()
    dropped: tuple[dict[str, str], ...] = ()
    usage: tuple[dict[str, Any], ...] = ()  # what each coder attempt spent, as it reported
    #: where a halted run's commits are kept (``refs/snodo/halted/<task>/<run>``), if any
    halted_ref: str | None = None
    #: what was thrown away, and why, when a constraint said the work must not be kept
    discarded: dict[str, Any] | None = None
    #: writes the sandbox refused, as reported (``{path, error, reported_by}``; engine.refused)
    refusals: tuple[dict[str, Any], ...] = ()

    def payload(self) -> dict[str, Any]:
        key = "completed" if self.status == "completed" else (self.outcome or "internal_error")
        shown = {"results": "validators", "refusals": "sandbox_refusals"}
        data = {shown.get(name, name): value for name, value in asdict(self).items()}
        return {**data, "next": RUN_NEXT_STEP[key].format(decision_id=self.decision_id, task_id=self.task_id)}


class Halt(Exception):
    """Stops a run: why, where, and what it leaves behind."""

    def __init__(
        self,
        outcome: HaltOutcome,
        phase: str,
        message: str,
        *,
        validation: ValidationOutcome | None = None,
        results: tuple[dict[str, Any], ...] = (),
        commit: str | None = None,
        files: tuple[str, ...] = (),
    ) -> None:
        super().__init__(message)
        self.outcome = outcome
        self.phase = phase
        self.message = message
        if validation is not None and not results:
            results = tuple(r.for_agent() for r in validation.results)
        self.results = results
        self.decision_id = validation.decision_id if validation is not None else None
        self.commit = commit
        self.files = files


def halt_for(exc: Exception) -> Halt:
    if isinstance(exc, Halt):
        return exc
    if isinstance(exc, CoderError):  # the coder ran and said it could not do the work
        return Halt("coder_failed", "execute", f"the coder failed: {exc}")
    if isinstance(exc, EnvironmentProblem | PluginError):
        return Halt("environment_error", "execute", str(exc))
    return Halt("internal_error", "engine", str(exc) if isinstance(exc, SnodoError) else f"{type(exc).__name__}: {exc}")


def plain_usage(usage: Any) -> dict[str, Any]:
    """A coder's usage report, kept to bounded JSON scalars (it is plugin output, so untrusted)."""
    if not isinstance(usage, Mapping):
        return {}
    plain: dict[str, Any] = {}
    for key, value in list(usage.items())[:32]:
        if not isinstance(key, str) or key in ("attempt", "task_id", "coder", "validator", "phase", "run_id"):
            continue
        if isinstance(value, bool | int | float) or value is None:
            plain[key[:64]] = value
        elif isinstance(value, str):
            plain[key[:64]] = value[:300]
        elif isinstance(value, list | tuple):
            plain[key[:64]] = [str(v)[:300] for v in value[:20]]
    return plain


def finding(result: ValidatorResult) -> str:
    """What a fix attempt is told about one verdict."""
    text = f"{result.validator_id}: {result.justification}"
    details = result.details or {}
    failed = details.get("failed_tests")
    if isinstance(failed, list) and failed:
        text += "\nfailed tests: " + ", ".join(str(t) for t in failed[:20])
    excerpt = details.get("output_excerpt")
    if isinstance(excerpt, str) and excerpt.strip():
        text += "\noutput:\n" + excerpt[:4000]
    return text
