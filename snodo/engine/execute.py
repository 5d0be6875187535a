"""One coder attempt's execution, and how its work reaches the working copy.

The coder runs confined (its sandbox policy, network only when it declares the need). An
in-place coder is watched (:class:`~snodo.engine.inplace.InPlaceWatch`): every path it
changed is judged by the same path guard as the tools, and one refusal halts the run. A
coder that returns operations has them filtered by the ``snodo_filter_artifacts`` hooks
(the core's own implementation drops ``.snodo/``, ``.git/`` and protected paths), then
written through the guard.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path
from typing import Any, Protocol

from snodo.attrsbase import frozen
from snodo.base.errors import CoderError, EnvironmentProblem, PathValidationError
from snodo.engine.inplace import InPlaceWatch, Judgement
from snodo.engine.results import Halt, Progress
from snodo.engine.worktree import Worktree
from snodo.governance.service import Project
from snodo.plugin.records import ArtifactContext, CoderRequest, CoderResult, CoderSpec, FileOperation
from snodo.sandbox import confined
from snodo.workspace import PathGuard, Workspace


class Spent(Protocol):
    """Records what an attempt spent (the engine's usage account)."""

    def __call__(self, task_id: str, attempt: int, reported: Any, **who: str) -> None: ...


@frozen(kw_only=True)
class Executed:
    """What one attempt changed (paths relative to the working copy), what was refused, a
    signature of the change (for the stall check) and the tip of a coder's own commits."""

    changed: tuple[str, ...]
    dropped: tuple[dict[str, str], ...]
    signature: tuple[Any, ...]
    coder_head: str | None = None


def run_coder(
    p: Project,
    spec: CoderSpec,
    request: CoderRequest,
    wt: Worktree,
    task_id: str,
    *,
    spent: Spent,
    progress: Progress,
    before_writes: Callable[[], None] | None = None,
) -> Executed:
    """Run one coder attempt confined and bring its work into the working copy: an in-place
    coder's changes are judged by the path guard (:class:`InPlaceWatch`); a coder's returned
    operations go through the artifact filter hooks, then guarded writes. Every refusal is
    audited as ``path_refused``; what the attempt spent is recorded even when it fails.
    ``before_writes`` is called after the coder returned its operations and before the
    first is written (not for an in-place coder)."""
    caps = spec.capabilities
    watch = (
        InPlaceWatch(
            wt.path,
            PathGuard(wt.path, p.protocol.protected_paths),
            branch=wt.branch,
            commits_own_changes=caps.commits_own_changes,
        )
        if caps.writes_in_place
        else None
    )
    try:
        try:
            with confined(p.sandbox_policy(wt.path, network=spec.capabilities.needs_network)):
                result = p.host.generate(spec.name, request)
        except BaseException as exc:  # a failed, timed-out or interrupted attempt still spent
            spent(task_id, request.attempt, getattr(exc, "usage", None), coder=spec.name)
            if isinstance(exc, EnvironmentProblem | CoderError) or not isinstance(exc, Exception):
                raise
            raise EnvironmentProblem(f"coder {spec.name!r} crashed: {type(exc).__name__}: {exc}") from exc
    except Exception:
        if watch is not None:  # what it did before failing is judged all the same
            refuse_in_place(p, watch.judge(), spec.name, task_id)
        raise
    if not isinstance(result, CoderResult):
        raise CoderError(f"coder {spec.name!r} returned {type(result).__name__}, not a CoderResult")
    spent(task_id, request.attempt, result.usage, coder=spec.name)
    if watch is not None:
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
        head = judged.head if judged.commits else None
        return Executed(changed=tuple(judged.changed), dropped=(), signature=judged.signature, coder_head=head)
    if before_writes is not None:
        before_writes()
    return _write_artifacts(p, spec, tuple(result.operations), wt, task_id, progress)


def _write_artifacts(
    p: Project, spec: CoderSpec, ops: tuple[FileOperation, ...], wt: Worktree, task_id: str, progress: Progress
) -> Executed:
    """The artifact filter hooks drop what no coder may write (audited), then every kept
    operation goes through the path guard (a second line of defence behind the filter)."""
    kept, dropped = p.host.filter_artifacts(
        ops,
        ArtifactContext(
            workspace=wt.path, task_id=task_id, mode_id=p.mode_id, protected_paths=p.protocol.protected_paths
        ),
    )
    dropped_json = []
    for d in dropped:
        p.record(
            "path_refused",
            task_id=task_id,
            path=d.operation.path,
            op=d.operation.op,
            source=f"coder:{spec.name}",
            reason=d.reason,
        )
        dropped_json.append({"path": d.operation.path, "op": d.operation.op, "reason": d.reason})
        progress(f"refused {d.operation.op} {d.operation.path}: {d.reason}")
    ws = Workspace(wt.path, PathGuard(wt.path, p.protocol.protected_paths), durable=False)  # committed next
    changed: list[str] = []
    for op in kept:
        try:
            if op.op == "write":
                ws.write_file(op.path, op.content or "")
            else:
                ws.delete_file(op.path)
        except PathValidationError as exc:  # second line of defence behind the filter
            p.record(
                "path_refused",
                task_id=task_id,
                path=op.path,
                op=op.op,
                source=f"coder:{spec.name}",
                reason=exc.reason,
            )
            dropped_json.append({"path": op.path, "op": op.op, "reason": exc.reason})
            continue
        changed.append(_normalise(wt.path, op))
    return Executed(
        changed=tuple(changed),
        dropped=tuple(dropped_json),
        signature=tuple((o.op, o.path, o.content) for o in kept),
    )


def refuse_in_place(p: Project, judged: Judgement, coder: str, task_id: str) -> None:
    """One ``path_refused`` per path an in-place coder may not change, then halt."""
    for path, reason in judged.refused:
        extra = {"restored": path in judged.restored} if path.startswith(("../", ".git/")) else {}
        p.record("path_refused", task_id=task_id, path=path, source=f"coder:{coder}", reason=reason, **extra)
    if judged.refused:
        raise Halt("blocker", "execute", judged.message(coder))


def _normalise(root: Path, op: FileOperation) -> str:
    return Path(os.path.relpath(os.path.normpath(root / op.path), root)).as_posix()
