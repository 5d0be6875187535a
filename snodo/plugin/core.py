"""The core's own plugin, registered first and not blockable: the artifact filter (ADR 026:
the path guard on the coder path) and the deterministic planner, asked last."""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING

import pluggy

from snodo.base.errors import PathValidationError
from snodo.plugin.hookspecs import PROJECT
from snodo.plugin.planning import DeterministicPlanner
from snodo.plugin.records import ArtifactContext, DroppedOperation, FileOperation
from snodo.rules.guard import PathGuard

if TYPE_CHECKING:
    from snodo.protocol.models import Mode

hookimpl = pluggy.HookimplMarker(PROJECT)


@hookimpl
def snodo_filter_artifacts(
    operations: tuple[FileOperation, ...], context: ArtifactContext
) -> Iterator[DroppedOperation]:
    guard = PathGuard(context.workspace, context.protected_paths)
    for op in operations:
        try:
            guard.check_mutation(op.path)
        except PathValidationError as exc:
            yield DroppedOperation(operation=op, reason=exc.reason)


@hookimpl(trylast=True)
def snodo_planner(mode: Mode) -> DeterministicPlanner:
    return DeterministicPlanner()
