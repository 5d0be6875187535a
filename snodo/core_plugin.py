"""The core's own plugin: the artifact filter that keeps coders out of governance state.

Registered by :func:`snodo.plugins.get_plugin_manager` before any entry point and not
blockable: it is the ADR 026 guarantee on the coder path, using the same path guard as
every tool-surface mutation.
"""

from __future__ import annotations

from collections.abc import Iterator

import pluggy

from snodo.errors import PathValidationError
from snodo.hookspecs import PROJECT
from snodo.records import ArtifactContext, DroppedOperation, FileOperation
from snodo.workspace.guard import PathGuard

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
