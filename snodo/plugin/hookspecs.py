"""The hooks a snodo plugin may implement with :data:`snodo.api.hookimpl`, called with keyword
arguments; a plugin is an entry point of the group ``snodo`` (docs/plugins.md). Each kind has
a registration hook yielding typed records and a ``firstresult`` dispatch hook that only the
registering plugin answers.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING, Any

import pluggy

if TYPE_CHECKING:
    from snodo.plugin.planning import PlannerImpl
    from snodo.plugin.records import (
        ArtifactContext,
        CoderRequest,
        CoderResult,
        CoderSpec,
        DroppedOperation,
        FileOperation,
        PredicateContext,
        PredicateResult,
        PredicateSpec,
        ValidationRequest,
        ValidatorSpec,
        Verdict,
    )
    from snodo.protocol.models import Mode, Validator

PROJECT = "snodo"

hookspec = pluggy.HookspecMarker(PROJECT)


@hookspec
def snodo_coders() -> Iterable[CoderSpec]:
    """Register coders a mode can name in its ``coder`` field; asked once per plugin, the first
    time the host is asked for a coder. :func:`snodo_generate` does the work."""


@hookspec(firstresult=True)
def snodo_generate(name: str, request: CoderRequest) -> CoderResult | None:
    """One attempt of the coder ``name``, called confined and only on the plugin that registered
    it. Raise :class:`~snodo.api.CoderError` when the work cannot be done (the run retries while
    its budget lasts), :class:`~snodo.api.EnvironmentProblem` when the environment is at fault;
    ``None`` is a coder failure."""


@hookspec
def snodo_validators() -> Iterable[ValidatorSpec]:
    """Register validator types a protocol can name in ``validator_type``; called like
    :func:`snodo_coders`, verdicts come from :func:`snodo_validate`."""


@hookspec(firstresult=True)
def snodo_validate(name: str, request: ValidationRequest) -> Verdict | None:
    """Judge one task for one validator of the type ``name``, possibly from a worker thread, only
    on the plugin that registered it. ``None`` or an exception is an ``error`` result, which
    fails closed. Never modify the workspace."""


@hookspec
def snodo_predicates() -> Iterable[PredicateSpec]:
    """Register predicates a protocol's constraints can name; called like :func:`snodo_coders`,
    results come from :func:`snodo_check_predicate`."""


@hookspec(firstresult=True)
def snodo_check_predicate(name: str, context: PredicateContext, params: Mapping[str, Any]) -> PredicateResult | None:
    """Decide one constraint with the predicate ``name`` and the constraint's read-only
    ``params``, only on the plugin that registered it. ``None`` or an exception fails it closed."""


@hookspec
def snodo_filter_artifacts(
    operations: tuple[FileOperation, ...], context: ArtifactContext
) -> Iterable[DroppedOperation]:
    """Drop file operations a coder proposed, each with a reason, before anything is written.
    Every implementation is asked; the union of what they drop is removed, each drop audited
    (``path_refused``). A filter can only remove operations."""


@hookspec(firstresult=True)
def snodo_planner(mode: Mode) -> PlannerImpl | None:
    """The planner for the served ``mode`` (MCP plan tools), asked when ``snodo serve`` starts;
    the core's deterministic planner is asked last. Construct cheaply: call models in
    ``tasks``/``spec``."""


@hookspec
def snodo_preflight(mode: Mode, coder: str, coder_config: Mapping[str, Any], validators: tuple[Validator, ...]) -> None:
    """Check, once per run and before its first token, that what this plugin will call can be
    reached: settings beyond their types, credentials, endpoints. Raise
    :class:`~snodo.api.EnvironmentProblem` (or :class:`~snodo.api.CoderError` for a bad setting):
    the run halts as ``environment_error``."""
