"""The plugin host: one pluggy project, entry-point group ``snodo``. A broken plugin is
reported and the others keep working, unless ``SNODO_STRICT_PLUGINS=1``;
``SNODO_TRACE_PLUGINS=1`` traces every hook call on stderr."""

from __future__ import annotations

import os
import sys
from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING, Any, cast

import pluggy
from attrs import Factory, asdict, evolve, frozen

from snodo import DISTRIBUTION
from snodo.base.errors import CoderError, PluginError
from snodo.plugin import core as core_plugin
from snodo.plugin import hookspecs
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

if TYPE_CHECKING:
    from snodo.protocol.models import Mode

ENTRY_POINT_GROUP = "snodo"
STRICT_ENV = "SNODO_STRICT_PLUGINS"
TRACE_ENV = "SNODO_TRACE_PLUGINS"
CORE_PLUGIN_NAME = "snodo.core"


_BUILT_IN = (
    "mock litellm opencode pytest acceptance protocol llm files_in_scope tests_exist_for_modified no_secrets_in_diff"
)


def install_hint(name: str) -> str:
    if name in _BUILT_IN.split():
        return f"it is provided by the distribution {DISTRIBUTION!r}; reinstall it"
    return "install the plugin that provides it, then check `snodo plugins`"


@frozen(kw_only=True)
class _Origin:
    name: str
    distribution: str | None = None
    version: str | None = None
    module: str | None = None
    file: str | None = None


@frozen(kw_only=True)
class PluginInfo(_Origin):
    """What ``snodo plugins`` shows for one plugin."""

    status: str  # "ok" | "failed"
    error: str | None = None
    hooks: tuple[str, ...] = ()
    coders: tuple[str, ...] = ()
    validators: tuple[str, ...] = ()
    predicates: tuple[str, ...] = ()

    def as_json(self) -> dict[str, Any]:
        data = asdict(self)
        registers = {kind: data.pop(kind) for kind in ("coders", "validators", "predicates")}
        return {**data, "registers": registers}


@frozen(kw_only=True)
class _Registry:
    by_name: dict[str, Any] = Factory(dict)
    owner: dict[str, str] = Factory(dict)  # name -> the plugin that registered it
    conflicts: dict[str, str] = Factory(dict)  # name -> why it is registered by none


@frozen
class _Kind:
    register: str
    record: type
    dispatch: str
    what: str  # how a message names one


_KINDS: dict[str, _Kind] = {
    "coder": _Kind("snodo_coders", CoderSpec, "snodo_generate", "coder"),
    "validator": _Kind("snodo_validators", ValidatorSpec, "snodo_validate", "validator type"),
    "predicate": _Kind("snodo_predicates", PredicateSpec, "snodo_check_predicate", "predicate"),
}


def _describe_origin(origin: _Origin) -> str:
    dist = f" (distribution {origin.distribution} {origin.version or ''})".rstrip() if origin.distribution else ""
    return f'plugin "{origin.name}"{dist}'


def _plain_impls(pm: pluggy.PluginManager, hook_name: str) -> list[pluggy.HookImpl]:
    return [i for i in getattr(pm.hook, hook_name).get_hookimpls() if not (i.wrapper or i.hookwrapper)]


def _implements(pm: pluggy.PluginManager, hook_name: str, plugin_name: str) -> bool:
    return any(i.plugin_name == plugin_name for i in _plain_impls(pm, hook_name))


class PluginHost:
    """Typed façade over the pluggy manager; built by :func:`get_plugin_manager`."""

    def __init__(self, pm: pluggy.PluginManager) -> None:
        self.pm = pm
        self._origins: dict[str, _Origin] = {}
        self._failures: list[tuple[_Origin, str]] = []
        self._registries = {kind: _Registry() for kind in _KINDS}
        self._collected: set[str] = set()

    def _fail(self, origin: _Origin, error: str) -> None:
        self._failures.append((origin, error))
        if os.environ.get(STRICT_ENV, "").strip().lower() in ("1", "true", "yes"):
            raise PluginError(
                f"{_describe_origin(origin)} failed: {error}",
                hint=f"unset {STRICT_ENV} to skip broken plugins, or fix/uninstall it",
            )

    def register(self, plugin: object, origin: _Origin) -> None:
        try:
            self.pm.register(plugin, name=origin.name)
        except Exception as exc:  # pluggy validation or a duplicate name; isolate this plugin
            self._fail(origin, f"cannot register: {exc}")
            return
        try:
            self.pm.check_pending()
        except pluggy.PluginValidationError as exc:
            self.pm.unregister(plugin)
            self._fail(origin, f"implements an unknown hook: {exc}")
            return
        self._origins[origin.name] = origin

    def load_entrypoints(self) -> None:
        from importlib.metadata import entry_points  # noqa: PLC0415 a host given its plugins reads no metadata

        seen: set[str] = set()
        for ep in sorted(entry_points(group=ENTRY_POINT_GROUP), key=lambda e: e.name):
            if ep.name in seen:
                continue
            seen.add(ep.name)
            dist = ep.dist
            origin = _Origin(
                name=ep.name,
                distribution=dist.name if dist else None,
                version=dist.version if dist else None,
                module=ep.value,
            )
            try:
                plugin = ep.load()
            except Exception as exc:  # any import failure must not take the others down
                self._fail(origin, f'Error importing plugin "{ep.name}": {type(exc).__name__}: {exc}')
                continue
            self.register(plugin, evolve(origin, file=getattr(plugin, "__file__", None)))

    def _sync(self) -> None:
        """Ask each registration hook once per plugin registered now (through wrappers and
        tracing); a plugin that left takes its registrations with it."""
        current = [name for name, p in self.pm.list_name_plugin() if p is not None]
        if self._collected - set(current):  # a plugin left: start again from what is registered now
            self._registries = {kind: _Registry() for kind in _KINDS}
            self._collected = set()
        for name in (n for n in current if n not in self._collected):
            self._collected.add(name)
            self._collect_from(self._origins.get(name, _Origin(name=name)))

    def _collect_from(self, origin: _Origin) -> None:
        for kind, k in _KINDS.items():
            if _implements(self.pm, k.register, origin.name):
                for item in self._registrations(origin, k):
                    self._add(self._registries[kind], item, origin, k.record.__name__)

    def _registrations(self, origin: _Origin, kind: _Kind) -> list[Any]:
        """The plugin's ``kind`` records; none, and a failure, when the hook fails, yields
        anything else, or no dispatch hook answers for them."""
        self.pm.trace.root.get("registration")(kind.register, origin.name)
        try:
            items = [item for batch in self.caller_for(kind.register, origin.name)() for item in batch or ()]
            for item in items:
                if not isinstance(item, kind.record):
                    raise TypeError(
                        f"{kind.register} must yield {kind.record.__name__} records, got {type(item).__name__}"
                    )
        except Exception as exc:
            self._fail(origin, f"{kind.register} failed: {type(exc).__name__}: {exc}")
            return []
        if items and not _implements(self.pm, kind.dispatch, origin.name):
            names = ", ".join(repr(i.name) for i in items)
            self._fail(
                origin,
                f"registers {names} in {kind.register} but implements no {kind.dispatch} hook to answer for them",
            )
            return []
        return items

    def caller_for(self, hook_name: str, plugin_name: str) -> Any:
        """A caller of ``hook_name`` asking only ``plugin_name``, inside every wrapper for it."""
        others = [i.plugin for i in _plain_impls(self.pm, hook_name) if i.plugin_name != plugin_name]
        return self.pm.subset_hook_caller(hook_name, remove_plugins=others)

    def _add(self, registry: _Registry, item: Any, origin: _Origin, record: str) -> None:
        name = item.name
        if name in registry.by_name:
            first = self._origins.get(registry.owner[name], _Origin(name=registry.owner[name]))
            msg = (
                f"{record} {name!r} is registered by both {_describe_origin(first)} and "
                f"{_describe_origin(origin)}; uninstall one of them"
            )
            registry.conflicts[name] = msg
            self._fail(origin, msg)
            return
        registry.by_name[name] = item
        registry.owner[name] = origin.name

    def _registry(self, kind: str) -> _Registry:
        self._sync()
        return self._registries[kind]

    def _get(self, kind: str, name: str) -> Any:
        registry = self._registry(kind)
        conflict = registry.conflicts.get(name)
        if conflict:
            raise PluginError(conflict)
        if name not in registry.by_name:
            known = ", ".join(sorted(registry.by_name)) or "none"
            what = _KINDS[kind].what
            raise PluginError(f"no {what} named {name!r} is installed (installed: {known})", hint=install_hint(name))
        return registry.by_name[name]

    def coders(self) -> dict[str, CoderSpec]:
        return dict(sorted(self._registry("coder").by_name.items()))

    def validators(self) -> dict[str, ValidatorSpec]:
        return dict(sorted(self._registry("validator").by_name.items()))

    def predicates(self) -> dict[str, PredicateSpec]:
        return dict(sorted(self._registry("predicate").by_name.items()))

    def coder(self, name: str) -> CoderSpec:
        return cast("CoderSpec", self._get("coder", name))

    def validator(self, name: str) -> ValidatorSpec:
        return cast("ValidatorSpec", self._get("validator", name))

    def predicate(self, name: str) -> PredicateSpec:
        return cast("PredicateSpec", self._get("predicate", name))

    def owner_of(self, kind: str, name: str) -> str | None:
        return self._registry(kind).owner.get(name)

    def _dispatch(self, kind: str, name: str, **inputs: Any) -> Any:
        """Ask the plugin that registered ``name`` (a PluginError when none did), and no other."""
        self._get(kind, name)
        owner = self._registries[kind].owner[name]
        return self.caller_for(_KINDS[kind].dispatch, owner)(name=name, **inputs)

    def generate(self, name: str, request: CoderRequest) -> CoderResult:
        result = self._dispatch("coder", name, request=request)
        if result is None:
            raise CoderError(f"coder {name!r} gave no result (its plugin's snodo_generate returned None)")
        if not isinstance(result, CoderResult):
            raise CoderError(f"coder {name!r} returned {type(result).__name__}, not a CoderResult")
        return result

    def validate(self, request: ValidationRequest) -> Verdict | None:
        """``None``: no verdict, reported as ``validator_error``."""
        vtype = request.validator.validator_type
        result = self._dispatch("validator", vtype, request=request)
        if result is not None and not isinstance(result, Verdict):
            raise TypeError(f"validator {vtype!r} returned {type(result).__name__}, not a Verdict")
        return result

    def check_predicate(self, name: str, context: PredicateContext, params: Mapping[str, Any]) -> PredicateResult:
        result = self._dispatch("predicate", name, context=context, params=params)
        if not isinstance(result, PredicateResult):
            raise TypeError(f"predicate {name!r} returned {type(result).__name__}, not a PredicateResult")
        return result

    def planner(self, mode: Mode) -> PlannerImpl:
        """The planner for ``mode``: the first plugin's answer (the core's deterministic one last)."""
        return cast("PlannerImpl", self.pm.hook.snodo_planner(mode=mode))

    def filter_artifacts(
        self, operations: tuple[FileOperation, ...], context: ArtifactContext
    ) -> tuple[tuple[FileOperation, ...], tuple[DroppedOperation, ...]]:
        """Run every filter; return (kept operations, dropped ones with reasons)."""
        dropped: dict[FileOperation, DroppedOperation] = {}
        for batch in self.pm.hook.snodo_filter_artifacts(operations=operations, context=context):
            for d in batch or ():
                if not isinstance(d, DroppedOperation):
                    raise PluginError(f"an artifact filter returned {type(d).__name__}, not DroppedOperation")
                if d.operation in operations:
                    dropped.setdefault(d.operation, d)
        return tuple(op for op in operations if op not in dropped), tuple(dropped.values())

    def failures(self) -> list[tuple[str, str]]:
        self._sync()
        return [(_describe_origin(origin), error) for origin, error in self._failures]

    def info(self) -> list[PluginInfo]:
        self._sync()
        errors: dict[str, list[str]] = {}
        for origin, error in self._failures:
            errors.setdefault(origin.name, []).append(error)
        rows = []
        for name, origin in sorted(self._origins.items()):
            hooks = self.pm.get_hookcallers(self.pm.get_plugin(name)) or ()
            rows.append(
                PluginInfo(
                    **asdict(origin),
                    status="failed" if name in errors else "ok",
                    error="; ".join(errors.get(name, ())) or None,
                    hooks=tuple(sorted(hc.name for hc in hooks)),
                    coders=self._owned("coder", name),
                    validators=self._owned("validator", name),
                    predicates=self._owned("predicate", name),
                )
            )
        unregistered = {
            origin.name: (origin, error) for origin, error in self._failures if origin.name not in self._origins
        }
        for _, (origin, error) in sorted(unregistered.items()):
            rows.append(PluginInfo(**asdict(origin), status="failed", error=error))
        return rows

    def _owned(self, kind: str, plugin_name: str) -> tuple[str, ...]:
        return tuple(sorted(n for n, owner in self._registries[kind].owner.items() if owner == plugin_name))


def get_plugin_manager(*, entrypoints: bool = True, plugins: Iterable[object] = ()) -> PluginHost:
    """A fresh plugin host: the core plugin, every entry point of the group ``snodo`` (with
    ``entrypoints``), then ``plugins`` (tests, embedding applications)."""
    pm = pluggy.PluginManager(hookspecs.PROJECT)
    pm.add_hookspecs(hookspecs)
    if os.environ.get(TRACE_ENV):
        pm.trace.root.setwriter(sys.stderr.write)
        pm.enable_tracing()
    host = PluginHost(pm)
    host.register(
        core_plugin,
        _Origin(
            name=CORE_PLUGIN_NAME, distribution=DISTRIBUTION, module="snodo.plugin.core", file=core_plugin.__file__
        ),
    )
    if entrypoints:
        host.load_entrypoints()
    for i, plugin in enumerate(plugins):
        name = getattr(plugin, "__name__", None) or f"{type(plugin).__name__}-{i}"
        host.register(
            plugin,
            _Origin(name=name, module=getattr(plugin, "__module__", None), file=getattr(plugin, "__file__", None)),
        )
    return host
