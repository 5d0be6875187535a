"""Refusals are evidence on the engine path.

A write the sandbox refused does not change a file, so no after-the-fact look at the
working copy can see it; only the confined program's own report can. Two such reports reach
the engine: the lines a coder streams while it works (opencode's JSON events, a tool's error
text, all passed through ``CoderRequest.log``, which the loop prefixes with ``coder: ``)
and, once the run is over, what the validators' confined test runs printed. Every refused
path found is recorded as one ``sandbox_refusal`` audit event (bounded to
:data:`~snodo.sandbox.refusals.MAX_REFUSALS` a run) and carried in the run's result, so the
run's table, ``--json`` payload and ``jobs show`` name it, not only the job log.

A coder's report counts whatever it names (the coder is the agent); a test run's output
counts only paths no project permission explains (``.snodo/``, ``.git/``, protected paths),
since a project's own tests may print a ``Permission denied`` of their own making.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from attrs import evolve

from snodo.engine.results import RunResult
from snodo.sandbox.refusals import MAX_REFUSALS, Refusal, find_refusals, record_refusals, reported_by_tests

if TYPE_CHECKING:
    from snodo.governance.service import Project

#: How the loop streams a coder's own lines into the run's progress (engine.loop).
CODER_PREFIX = "coder: "
#: Characters of one line read for reports (a coder's line may be megabytes).
LINE_LIMIT = 20_000
#: Halts whose message is the coder's own words (its exception), read like its lines.
_CODER_HALTS = ("coder_failed", "environment_error")


class RefusalWatch:
    """Collects the refusals a run's coder reports as its lines stream by, then settles
    them (and those the validators' test output names) into audit events and the result."""

    def __init__(self) -> None:
        self.reported: list[Refusal] = []

    def see(self, line: str) -> None:
        """Take one progress line; only the coder's own lines are read."""
        if not line.startswith(CODER_PREFIX) or len(self.reported) >= MAX_REFUSALS:
            return
        for refusal in find_refusals([line[len(CODER_PREFIX) : len(CODER_PREFIX) + LINE_LIMIT]]):
            if refusal not in self.reported:
                self.reported.append(refusal)

    def settle(self, project: Project, result: RunResult) -> RunResult:
        """Record one ``sandbox_refusal`` per refused path (first report wins) and return
        ``result`` carrying them; ``result`` itself when there are none."""
        if result.outcome in _CODER_HALTS and result.phase == "execute":
            self.reported.extend(r for r in find_refusals([result.message[:LINE_LIMIT]]) if r not in self.reported)
        groups: list[tuple[str, tuple[Refusal, ...]]] = [("coder", tuple(self.reported))]
        protected = project.protocol.protected_paths
        for verdict in result.results:
            details = verdict.get("details")
            details = details if isinstance(details, dict) else {}
            texts = [str(details.get(key) or "")[:LINE_LIMIT] for key in ("output_excerpt", "added_tests_output")] + [
                str(verdict.get("justification") or "")
            ]
            found = reported_by_tests(texts, protected)
            if found:
                groups.append((f"validator:{verdict.get('validator_id')}", found))
        entries: list[dict[str, Any]] = []
        for who, refusals in groups:
            for refusal in refusals:
                if len(entries) >= MAX_REFUSALS or any(e["path"] == refusal.path for e in entries):
                    continue
                record_refusals(project.record, (refusal,), who=who, task_id=result.task_id, job_id=result.job_id)
                entries.append({"path": refusal.path, "error": refusal.error, "reported_by": who})
        return evolve(result, refusals=tuple(entries)) if entries else result
