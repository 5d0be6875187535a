"""Well-formedness rules WF1–WF5 (docs/protocol.md), checked at every load, all violations
reported together; with the plugin host, plugin names and settings too."""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Iterable, Iterator
from typing import Any, Literal

from attrs import frozen

from snodo.base.convert import did_you_mean
from snodo.base.errors import PluginError
from snodo.plugin.host import PluginHost, install_hint
from snodo.protocol.capabilities import ALWAYS_EXCLUSIVE, CAPABILITY_TOOLS
from snodo.protocol.models import PHASES, Constraint, Mode, Protocol
from snodo.rules.settings import coder_config_problems, tooling_problems


@frozen(kw_only=True)
class Violation:
    rule: str
    message: str
    level: Literal["error", "warning"] = "error"

    def __str__(self) -> str:
        return f"{self.rule}: {self.message}" if self.level == "error" else f"{self.rule} (warning): {self.message}"

    def as_json(self) -> dict[str, str]:
        return {"rule": self.rule, "level": self.level, "message": self.message}


_FIELD = re.compile(r" @ ([A-Za-z_][\w]*(?:\.[A-Za-z_]\w*|\[\d+\])*)")


def located(violations: Iterable[Violation], root: Any, source: str) -> list[Violation]:
    """``violations`` prefixed with the ``file:line`` of the field each names, as the loader words its problems."""
    from snodo.protocol.yamldoc import line_of  # noqa: PLC0415 PyYAML loads only when a protocol is parsed

    out = []
    for v in violations:
        field = _FIELD.search(v.message)
        line = line_of(root, "." + field.group(1)) if field is not None else None
        out.append(Violation(rule=v.rule, level=v.level, message=f"{source}:{line}: {v.message}") if line else v)
    return out


def _dupes(rule: str, field: str, ids: list[str]) -> Iterator[Violation]:
    for d in sorted(i for i, n in Counter(ids).items() if n > 1):
        yield Violation(rule=rule, message=f"{field} {d!r} is declared more than once")


def _all_constraints(p: Protocol) -> list[tuple[str, Constraint]]:
    found = [(f"global_constraints[{i}]", c) for i, c in enumerate(p.global_constraints)]
    for mi, m in enumerate(p.modes):
        found += [(f"modes[{mi}] ({m.mode_id}).constraints[{i}]", c) for i, c in enumerate(m.constraints)]
    for vi, v in enumerate(p.validators):
        found += [(f"validators[{vi}] ({v.validator_id}).constraints[{i}]", c) for i, c in enumerate(v.constraints)]
    return found


def _plugin_missing(exc: PluginError, kind: str, name: str, installed: list[str]) -> str:
    if name in installed:
        return f"{exc.message} ({exc.hint})" if exc.hint else exc.message
    return (
        f"no {kind} named {name!r} is installed{did_you_mean(name, installed)}; "
        f"installed: {', '.join(sorted(installed)) or 'none'} ({install_hint(name)})"
    )


def check(protocol: Protocol, host: PluginHost | None = None) -> list[Violation]:
    """Every rule's violations, in rule then document order (``host``: the plugin checks too)."""
    p = protocol
    out = [*_known_capabilities(p), *_unique_ids(p), *_wf1_exclusive(p), *_wf2_roles(p), *_wf3_references(p)]
    if host is not None:
        out += [*_validator_plugins(p, host), *_coder_plugins(p, host)]
    return [*out, *_wf4_policy_fits(p), *_wf5_constraints(p, host), *_sandbox_off(p)]


def _known_capabilities(p: Protocol) -> Iterator[Violation]:
    """CAP: every capability a mode grants or ``exclusive_tools`` names is known."""
    known = sorted(CAPABILITY_TOOLS)
    for mi, m in enumerate(p.modes):
        for ti, cap in enumerate(m.tools):
            if cap not in CAPABILITY_TOOLS:
                yield Violation(
                    rule="CAP",
                    message=f"mode {m.mode_id!r} grants unknown capability {cap!r}{did_you_mean(cap, known)} "
                    f"@ modes[{mi}].tools[{ti}]; known capabilities: {', '.join(known)}",
                )
    for cap in p.exclusive_tools:
        if cap not in CAPABILITY_TOOLS:
            yield Violation(
                rule="CAP",
                message=f"exclusive_tools names unknown capability {cap!r}{did_you_mean(cap, known)}; "
                f"known capabilities: {', '.join(known)}",
            )


def _unique_ids(p: Protocol) -> Iterator[Violation]:
    """ID: mode and validator ids are unique."""
    yield from _dupes("ID", "mode_id", [m.mode_id for m in p.modes])
    yield from _dupes("ID", "validator_id", [v.validator_id for v in p.validators])


def _wf1_exclusive(p: Protocol) -> Iterator[Violation]:
    """WF1: an exclusive tool is held by at most one mode."""
    for cap in sorted({*ALWAYS_EXCLUSIVE, *p.exclusive_tools}):
        holders = [m.mode_id for m in p.modes if cap in m.tools]
        if len(holders) > 1:
            yield Violation(
                rule="WF1",
                message=f"exclusive capability {cap!r} is held by {len(holders)} modes: {', '.join(holders)} "
                "(at most one mode may hold it)",
            )


def _wf2_roles(p: Protocol) -> Iterator[Violation]:
    """WF2: role ids are unique, and roles name existing modes."""
    yield from _dupes("WF2", "role_id", [r.role_id for r in p.roles])
    mode_ids = {m.mode_id for m in p.modes}
    for r in p.roles:
        for mid in r.modes:
            if mid not in mode_ids:
                message = f"role {r.role_id!r} names unknown mode {mid!r}{did_you_mean(mid, mode_ids)}"
                yield Violation(rule="WF2", message=message)


def _wf3_references(p: Protocol) -> Iterator[Violation]:
    """WF3 without the plugin host: references resolve, a dispatching mode is gated in both phases."""
    mode_ids = {m.mode_id for m in p.modes}
    for m in p.modes:
        yield from _wf3_mode(p, m, mode_ids)
    if p.initial_mode is not None and p.initial_mode not in mode_ids:
        yield Violation(
            rule="WF3",
            message=f"initial_mode {p.initial_mode!r} is not a declared mode{did_you_mean(p.initial_mode, mode_ids)} "
            f"({', '.join(sorted(mode_ids))})",
        )


def _wf3_mode(p: Protocol, m: Mode, mode_ids: set[str]) -> Iterator[Violation]:
    validator_ids = {v.validator_id for v in p.validators}
    for vid in (vid for vid in m.validators if vid not in validator_ids):
        yield Violation(
            rule="WF3",
            message=f"mode {m.mode_id!r} names validator {vid!r}, which is not declared"
            f"{did_you_mean(vid, validator_ids)} (declared: {', '.join(sorted(validator_ids)) or 'none'})",
        )
    for to in (t.to for t in m.transitions if t.to not in mode_ids):
        message = f"mode {m.mode_id!r} has a transition to unknown mode {to!r}{did_you_mean(to, mode_ids)}"
        yield Violation(rule="WF3", message=message)
    if "dispatch" in m.tools:
        yield from _wf3_ungated_phases(p, m)


def _wf3_ungated_phases(p: Protocol, m: Mode) -> Iterator[Violation]:
    for phase in (ph for ph in PHASES if not p.validators_for(m, ph)):
        role = "gate the work before it starts" if phase == "pre_execute" else "judge the work once done"
        yield Violation(
            rule="WF3",
            message=f"mode {m.mode_id!r} holds 'dispatch' but has no {phase} validator to {role}: "
            f"every run in this mode would halt (validator_error) at {phase}; add a "
            f"{phase} validator to the mode's validators",
        )


def _wf4_policy_fits(p: Protocol) -> Iterator[Violation]:
    """WF4: the disagreement policy fits the validator count."""
    n = len(p.validators)
    if p.disagreement_policy == "majority" and n < 2:
        message = f"disagreement_policy 'majority' needs at least 2 validators, the protocol declares {n}"
        yield Violation(rule="WF4", message=message)
    if p.disagreement_policy == "quorum" and n < 3:
        message = f"disagreement_policy 'quorum' with {n} validator(s) degenerates to unanimity; declare 3 or more"
        yield Violation(rule="WF4", level="warning", message=message)


def _wf5_constraints(p: Protocol, host: PluginHost | None) -> Iterator[Violation]:
    """WF5: constraint ids are unique and, with the plugin host, every predicate is registered."""
    constraints = _all_constraints(p)
    yield from _dupes("WF5", "constraint_id", [c.constraint_id for _, c in constraints])
    registered = set(host.predicates()) if host is not None else set()
    for where, c in constraints:
        if host is not None and c.predicate not in registered:
            yield Violation(
                rule="WF5",
                message=f"constraint {c.constraint_id!r} at {where} names unknown predicate {c.predicate!r}"
                f"{did_you_mean(c.predicate, registered)} (registered: {', '.join(sorted(registered)) or 'none'})",
            )


def _sandbox_off(p: Protocol) -> Iterator[Violation]:
    if p.execution.sandbox == "off":
        yield Violation(
            rule="EXEC",
            level="warning",
            message="execution.sandbox is 'off': tests, validator commands and in-place coders will run "
            "agent-written code unconfined, with your user's full access; each such run is audited "
            "(see docs/security.md)",
        )


def _validator_plugins(p: Protocol, host: PluginHost) -> Iterator[Violation]:
    """WF3 with the plugin host: each plugin is installed, and given only the settings it declares."""
    installed = list(host.validators())
    for vi, v in enumerate(p.validators):
        try:
            spec = host.validator(v.validator_type)
        except PluginError as exc:
            why = _plugin_missing(exc, "validator type", v.validator_type, installed)
            yield Violation(
                rule="WF3", message=f"validator {v.validator_id!r}: {why} @ validators[{vi}].validator_type"
            )
            continue
        for key, message in tooling_problems(v.validator_id, v.validator_type, spec.settings, v.tooling):
            yield Violation(rule="WF3", message=f"{message} @ validators[{vi}].tooling.{key}")
        users = ", ".join(m.mode_id for m in p.modes if v.validator_id in m.validators)
        if spec.needs_model and v.model is None and users:
            yield Violation(
                rule="WF3",
                message=f"validator {v.validator_id!r} (type {v.validator_type}) is judged by a model but sets no "
                f"`model`: it would report validator_error on every run of mode(s) {users}; set `model` "
                f"(e.g. openai/gpt-4o-mini) or remove it from those modes @ validators[{vi}].model",
            )


def _coder_plugins(p: Protocol, host: PluginHost) -> Iterator[Violation]:
    installed = list(host.coders())
    for mi, m in enumerate(p.modes):
        try:
            spec = host.coder(m.coder)
        except PluginError as exc:
            why = _plugin_missing(exc, "coder", m.coder, installed)
            yield Violation(rule="WF3", message=f"mode {m.mode_id!r} coder: {why} @ modes[{mi}].coder")
            continue
        for key, message in coder_config_problems(m.coder, spec.capabilities.settings, m.coder_config):
            yield Violation(rule="WF3", message=f"mode {m.mode_id!r}: {message} @ modes[{mi}].coder_config.{key}")
