"""One coder attempt, confined, and how its work reaches the working copy: an in-place
coder's changes are judged (:class:`~snodo.engine.inplace.InPlaceWatch`; one refusal halts),
returned operations go through ``snodo_filter_artifacts``, then guarded writes.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

from attrs import frozen

from snodo.base.errors import CoderError, EnvironmentProblem, PathValidationError
from snodo.engine.inplace import InPlaceWatch, Judgement
from snodo.engine.results import Halt, Progress
from snodo.engine.worktree import Worktree
from snodo.governance.service import Project
from snodo.plugin.records import ArtifactContext, CoderRequest, CoderResult, CoderSpec, FileOperation
from snodo.sandbox import confined
from snodo.workspace import PathGuard, Workspace

#: Records what the attempt spent (the engine's usage account): ``spent(reported, coder=name)``.
Spent = Callable[..., None]


@frozen(kw_only=True)
class Executed:
    """What one attempt changed and refused, its change's signature (stall check), its own commits' tip."""

    changed: tuple[str, ...]
    dropped: tuple[dict[str, str], ...]
    signature: tuple[Any, ...]
    coder_head: str | None = None


def run_coder(
    p: Project,
    spec: CoderSpec,
    request: CoderRequest,
    wt: Worktree,
    guard: PathGuard,
    *,
    spent: Spent,
    progress: Progress,
) -> Executed:
    """One coder attempt, its work brought into the working copy; what it spent is recorded even on failure."""
    task_id = request.task_id
    caps = spec.capabilities
    watch = None
    if caps.writes_in_place:
        watch = InPlaceWatch(wt.path, guard, branch=wt.branch, commits_own_changes=caps.commits_own_changes)
    try:
        result = _generate(p, spec, request, wt, spent)
    except Exception:
        if watch is not None:  # what it did before failing is judged all the same
            refuse_in_place(p, watch.judge(), spec.name, task_id)
        raise
    spent(result.usage, coder=spec.name)
    if watch is None:
        return _write_artifacts(p, spec, tuple(result.operations), wt, guard, task_id, progress)
    judged = watch.judge()
    refuse_in_place(p, judged, spec.name, task_id)
    if judged.commits:
        p.record(
            "commit",
            task_id=task_id,
            branch=wt.branch,
            commit=judged.head,
            commits=list(judged.commits),
            files=list(judged.changed),
            by=f"coder:{spec.name}",
        )
    return Executed(changed=judged.changed, dropped=(), signature=judged.signature, coder_head=judged.head)


def _generate(p: Project, spec: CoderSpec, request: CoderRequest, wt: Worktree, spent: Spent) -> CoderResult:
    try:
        with confined(p.sandbox_policy(wt.path, network=spec.capabilities.needs_network)):
            result = p.host.generate(spec.name, request)
    except BaseException as exc:  # a failed, timed-out or interrupted attempt still spent
        spent(getattr(exc, "usage", None), coder=spec.name)
        if isinstance(exc, EnvironmentProblem | CoderError) or not isinstance(exc, Exception):
            raise
        raise EnvironmentProblem(f"coder {spec.name!r} crashed: {type(exc).__name__}: {exc}") from exc
    return result


def _write_artifacts(
    p: Project,
    spec: CoderSpec,
    ops: tuple[FileOperation, ...],
    wt: Worktree,
    guard: PathGuard,
    task_id: str,
    progress: Progress,
) -> Executed:
    """The artifact filter hooks drop what no coder may write; the path guard is a second line of defence."""
    context = ArtifactContext(
        workspace=wt.path, task_id=task_id, mode_id=p.mode_id, protected_paths=p.protocol.protected_paths
    )
    kept, dropped = p.host.filter_artifacts(ops, context)
    refused: list[dict[str, str]] = []

    def refuse(op: FileOperation, reason: str) -> None:
        p.record("path_refused", task_id=task_id, path=op.path, op=op.op, source=f"coder:{spec.name}", reason=reason)
        refused.append({"path": op.path, "op": op.op, "reason": reason})

    for d in dropped:
        refuse(d.operation, d.reason)
        progress(f"refused {d.operation.op} {d.operation.path}: {d.reason}")
    ws = Workspace(wt.path, guard, durable=False)  # committed next
    changed: list[str] = []
    for op in kept:
        try:
            if op.op == "write":
                ws.write_file(op.path, op.content or "")
            else:
                ws.delete_file(op.path)
        except PathValidationError as exc:
            refuse(op, exc.reason)
            continue
        changed.append(Path(os.path.relpath(os.path.normpath(wt.path / op.path), wt.path)).as_posix())
    return Executed(
        changed=tuple(changed),
        dropped=tuple(refused),
        signature=tuple((o.op, o.path, o.content) for o in kept),
    )


def refuse_in_place(p: Project, judged: Judgement, coder: str, task_id: str) -> None:
    """One ``path_refused`` per path an in-place coder may not change, then halt."""
    for path, reason in judged.refused:
        extra = {"restored": path in judged.restored} if path.startswith(("../", ".git/")) else {}
        p.record("path_refused", task_id=task_id, path=path, source=f"coder:{coder}", reason=reason, **extra)
    if judged.refused:
        raise Halt("blocker", "execute", judged.message(coder))
