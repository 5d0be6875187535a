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
    """Register coders a mode can name in its ``coder`` field; :func:`snodo_generate` does the work.

    Called once per plugin, the first time the host is asked for a coder.

    Example::

        @hookimpl
        def snodo_coders():
            yield CoderSpec(
                name="patch",
                description="applies the unified diff found in the spec",
                capabilities=CoderCapabilities(writes_in_place=False, commits_own_changes=False),
            )
    """


@hookspec(firstresult=True)
def snodo_generate(name: str, request: CoderRequest) -> CoderResult | None:
    """Do one attempt of the coder ``name`` (one plugin may register several).

    Called confined (docs/security.md), only on the plugin that registered ``name``.
    ``request.config`` is the mode's ``coder_config``, checked against the declared
    ``settings`` (defaults not filled in: :meth:`~snodo.api.Setting.with_defaults`). Raise
    :class:`~snodo.api.CoderError` when the work cannot be done (the run retries with the
    reason while its budget lasts), :class:`~snodo.api.EnvironmentProblem` when the
    environment is at fault; ``None`` is a coder failure. Check settings beyond their
    types in :func:`snodo_preflight`, before any token is spent.

    Example::

        @hookimpl
        def snodo_generate(name, request):
            if name == "patch":
                return CoderResult(operations=parse_patch(request.spec))
            return None
    """


@hookspec
def snodo_validators() -> Iterable[ValidatorSpec]:
    """Register validator types a protocol can name in ``validator_type``; called like
    :func:`snodo_coders`, verdicts come from :func:`snodo_validate`.

    Example::

        @hookimpl
        def snodo_validators():
            yield ValidatorSpec(name="forbidden-imports", description="no banned imports")
    """


@hookspec(firstresult=True)
def snodo_validate(name: str, request: ValidationRequest) -> Verdict | None:
    """Judge one task for one validator of the type ``name``: a :class:`~snodo.api.Verdict`.

    Called possibly from a worker thread, once per configured validator and phase, only on
    the plugin that registered ``name``. ``None`` and any exception (no verdict can be
    reached) are an ``error`` result, which fails closed. Never modify the workspace.

    Example::

        @hookimpl
        def snodo_validate(name, request):
            if name != "forbidden-imports":
                return None
            bad = find_banned(request.workspace, request.changed_files)
            if bad:
                return Verdict(severity="blocker", justification=f"banned imports: {bad}")
            return Verdict(severity="pass", justification="no banned imports")
    """


@hookspec
def snodo_predicates() -> Iterable[PredicateSpec]:
    """Register predicates a protocol's constraints can name; called like
    :func:`snodo_coders`, results come from :func:`snodo_check_predicate`.

    Example::

        @hookimpl
        def snodo_predicates():
            yield PredicateSpec(name="small_change", description="at most params.max files")
    """


@hookspec(firstresult=True)
def snodo_check_predicate(name: str, context: PredicateContext, params: Mapping[str, Any]) -> PredicateResult | None:
    """Decide one constraint with the predicate ``name``: a :class:`~snodo.api.PredicateResult`.

    Called once per constraint and phase, only on the plugin that registered ``name``, with
    the constraint's read-only ``params``. ``None`` or an exception fails it closed.

    Example::

        @hookimpl
        def snodo_check_predicate(name, context, params):
            if name == "small_change":
                n = len(context.changed_files)
                return PredicateResult(ok=n <= params.get("max", 10), message=f"{n} files changed")
            return None
    """


@hookspec
def snodo_filter_artifacts(
    operations: tuple[FileOperation, ...], context: ArtifactContext
) -> Iterable[DroppedOperation]:
    """Drop file operations a coder proposed, each with a reason, before anything is written.

    Every implementation is called after every coder run; the union of what they drop is
    removed and each drop audited (``path_refused``). A filter can only remove operations.

    Example::

        @hookimpl
        def snodo_filter_artifacts(operations, context):
            for op in operations:
                if op.path.endswith(".lock"):
                    yield DroppedOperation(operation=op, reason="lock files are generated")
    """


@hookspec(firstresult=True)
def snodo_planner(mode: Mode) -> PlannerImpl | None:
    """Supply the planner that breaks goals into task specs for the served ``mode`` (MCP plan tools).

    Called when ``snodo serve`` starts; the first non-``None`` answer wins, the core's
    deterministic planner is asked last. Construct cheaply: check settings and call models
    in ``tasks``/``spec``, not here. The planner has ``name`` (recorded in each plan),
    ``tasks(goal)`` returning ``[{"title": str, "spec": str}, ...]`` (1 to 50 items) and
    ``spec(task, context=None)`` returning one spec text; a
    :class:`~snodo.api.SnodoError` it raises reaches the agent as a tool error.

    Example::

        @hookimpl
        def snodo_planner(mode):
            if mode.coder != "patch":
                return None
            return OnePerLinePlanner()
    """


@hookspec
def snodo_preflight(mode: Mode, coder: str, coder_config: Mapping[str, Any], validators: tuple[Validator, ...]) -> None:
    """Check, before the first token of a run, that what this plugin will call can be reached.

    Every implementation is called once per run, with the run's mode, coder and its settings,
    and every validator of the mode (both phases). Check only what is yours, cheaply:
    settings beyond their declared types, credentials present, endpoints well-formed and
    reachable. Raise :class:`~snodo.api.EnvironmentProblem` (or :class:`~snodo.api.CoderError`
    for a bad setting) naming what is wrong: the run halts as ``environment_error``.

    Example::

        @hookimpl
        def snodo_preflight(mode, coder, coder_config, validators):
            if coder == "my-coder" and not os.environ.get("MY_CODER_KEY"):
                raise EnvironmentProblem("my-coder needs MY_CODER_KEY", hint="export MY_CODER_KEY=...")
    """
