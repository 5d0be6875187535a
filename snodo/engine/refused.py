"""Refusals are evidence on the engine path: a write the sandbox refused changes no file, so
only what the coder streams and the validators' test runs print shows it. A test run's output
counts only paths no project permission explains (a project's own tests may print a
``Permission denied`` of their own making).
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
    """Collects the refusals a run's coder reports; :meth:`settle` records them and the validators'."""

    def __init__(self) -> None:
        self.reported: list[Refusal] = []

    def see(self, line: str) -> None:
        if line.startswith(CODER_PREFIX) and len(self.reported) < MAX_REFUSALS:
            self._add(line[len(CODER_PREFIX) : len(CODER_PREFIX) + LINE_LIMIT])

    def _add(self, text: str) -> None:
        self.reported.extend(r for r in find_refusals([text]) if r not in self.reported)

    def settle(self, project: Project, result: RunResult) -> RunResult:
        """One ``sandbox_refusal`` per refused path (first report wins; at most MAX_REFUSALS); ``result`` with them."""
        if result.outcome in _CODER_HALTS and result.phase == "execute":
            self._add(result.message[:LINE_LIMIT])
        groups = [("coder", tuple(self.reported)), *_by_validators(result, project.protocol.protected_paths)]
        entries: list[dict[str, Any]] = []
        for who, refusals in groups:
            for refusal in refusals:
                if len(entries) >= MAX_REFUSALS or any(e["path"] == refusal.path for e in entries):
                    continue
                record_refusals(project.record, (refusal,), who=who, task_id=result.task_id, job_id=result.job_id)
                entries.append({"path": refusal.path, "error": refusal.error, "reported_by": who})
        return evolve(result, refusals=tuple(entries)) if entries else result


def _by_validators(result: RunResult, protected: tuple[str, ...]) -> list[tuple[str, tuple[Refusal, ...]]]:
    groups = []
    for verdict in result.results:
        details = verdict.get("details")
        details = details if isinstance(details, dict) else {}
        texts = [str(details.get(key) or "")[:LINE_LIMIT] for key in ("output_excerpt", "added_tests_output")]
        found = reported_by_tests([*texts, str(verdict.get("justification") or "")], protected)
        if found:
            groups.append((f"validator:{verdict.get('validator_id')}", found))
    return groups
