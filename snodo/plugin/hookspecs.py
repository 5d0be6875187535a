"""The hooks a snodo plugin may implement (docs/plugins.md), called with keyword arguments.

A plugin is a module (or object) exposing functions decorated with :data:`snodo.api.hookimpl`,
listed as an entry point of the group ``snodo``::

    [project.entry-points.snodo]
    my-coder = "my_package.plugin"

Each kind (coders, validator types, predicates) has a registration hook yielding typed
records and a ``firstresult`` dispatch hook that only the registering plugin answers.
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
    """Register coders: code generators a mode can name in its ``coder`` field.

    Called once per plugin, the first time the host is asked for a coder (and again for a
    plugin registered later); the work is done by :func:`snodo_generate`.

    :return: the coders this plugin provides.

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
    """Do one coder attempt: the dispatch hook of every coder.

    Called once per attempt, confined (docs/security.md), only on the plugin that registered
    the coder ``name``. ``request.config`` is the mode's
    ``coder_config``, already checked against the declared ``settings`` (defaults are not
    filled in: :func:`snodo.api.with_defaults`). Raise :class:`~snodo.api.CoderError` when
    the work cannot be done (the run retries with the reason while its budget lasts),
    :class:`~snodo.api.EnvironmentProblem` when the environment is at fault; ``None`` is
    treated as a coder failure. Check settings beyond their declared types in
    :func:`snodo_preflight`, which runs before any token is spent.

    :param name: the registered coder asked (one plugin may register several).
    :param request: the task, workspace, settings and, on a recovery attempt, the findings.
    :return: a :class:`~snodo.api.CoderResult`.

    Example::

        @hookimpl
        def snodo_generate(name, request):
            if name == "patch":
                return CoderResult(operations=parse_patch(request.spec))
            return None
    """


@hookspec
def snodo_validators() -> Iterable[ValidatorSpec]:
    """Register validator types a protocol can name in ``validator_type``.

    Called like :func:`snodo_coders`; verdicts come from :func:`snodo_validate`.

    :return: the validator types this plugin provides.

    Example::

        @hookimpl
        def snodo_validators():
            yield ValidatorSpec(name="forbidden-imports", description="no banned imports")
    """


@hookspec(firstresult=True)
def snodo_validate(name: str, request: ValidationRequest) -> Verdict | None:
    """Judge one task for one validator: the dispatch hook of every validator type.

    Called possibly from a worker thread, once per configured validator and phase, only on
    the plugin that registered the type ``name``. ``None`` ("no verdict") and any exception
    (no verdict can be reached) are an ``error`` result, which fails closed. Never modify
    the workspace.

    :param name: the registered validator type asked.
    :param request: the validator's configuration, the task, the phase, the mode, the
        protocol, the workspace root and (post-execute) the changed files.
    :return: a :class:`~snodo.api.Verdict`.

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
    """Register constraint predicates a protocol can name in a constraint's ``predicate``.

    Called like :func:`snodo_coders`; results come from :func:`snodo_check_predicate`.

    :return: the predicates this plugin provides.

    Example::

        @hookimpl
        def snodo_predicates():
            yield PredicateSpec(name="small_change", description="at most params.max files")
    """


@hookspec(firstresult=True)
def snodo_check_predicate(name: str, context: PredicateContext, params: Mapping[str, Any]) -> PredicateResult | None:
    """Decide one constraint: the dispatch hook of every predicate.

    Called once per constraint and phase, only on the plugin that registered the predicate
    ``name``. ``None`` or an exception fails the constraint closed.

    :param name: the registered predicate asked.
    :param context: the workspace, task, phase and the change under judgement.
    :param params: the constraint's ``params`` from the protocol (read-only).
    :return: a :class:`~snodo.api.PredicateResult`.

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
    """Drop file operations a coder proposed before anything is written.

    Called after every coder run with all the operations it proposed. Every implementation
    is called; the union of what they drop is removed and each drop is audited
    (``path_refused``). A filter can only remove operations, never add or change them.

    :param operations: every operation the coder proposed, in order.
    :param context: the workspace root, task, mode and protected paths.
    :return: the operations to drop, each with a reason.

    Example::

        @hookimpl
        def snodo_filter_artifacts(operations, context):
            for op in operations:
                if op.path.endswith(".lock"):
                    yield DroppedOperation(operation=op, reason="lock files are generated")
    """


@hookspec(firstresult=True)
def snodo_planner(mode: Mode) -> PlannerImpl | None:
    """Supply the planner that breaks goals into task specs for ``mode`` (MCP plan tools).

    Called when ``snodo serve`` starts. The first non-``None`` answer wins; the core plugin's
    deterministic planner is asked last. Construct cheaply: check settings and call models
    in ``tasks``/``spec``, not here.

    :param mode: the served mode (its ``coder`` and ``coder_config``).
    :return: an object with ``name`` (a string recorded in each plan), ``tasks(goal)``
        returning ``[{"title": str, "spec": str}, ...]`` (1 to 50 items) and
        ``spec(task, context=None)`` returning one spec text; or ``None``. Raise a
        :class:`~snodo.api.SnodoError` subclass when planning fails; it reaches the agent as a
        tool error.

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

    Called once per run, after the coder's declared settings were checked and before any
    token is issued. Every implementation is called. Check only what is yours (your coder,
    validators of your types) and only cheaply: settings beyond their declared types,
    credentials present, endpoints well-formed and reachable. Raise :class:`~snodo.api.EnvironmentProblem` (or
    :class:`~snodo.api.CoderError` for a bad setting) naming what is wrong; the run halts as
    ``environment_error`` before the coder or any judge makes a request.

    :param mode: the mode the run is in.
    :param coder: the name of the coder the run will use.
    :param coder_config: the settings that coder was built with.
    :param validators: every validator of the mode the run will call (both phases).

    Example::

        @hookimpl
        def snodo_preflight(mode, coder, coder_config, validators):
            if coder == "my-coder" and not os.environ.get("MY_CODER_KEY"):
                raise EnvironmentProblem("my-coder needs MY_CODER_KEY", hint="export MY_CODER_KEY=...")
    """
