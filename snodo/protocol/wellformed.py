"""Well-formedness rules WF1–WF5 (docs/protocol.md), checked at every load.

Every rule runs and every violation is reported together, each naming its rule and the
culprits, so an author fixes a protocol in one pass instead of one error at a time.

The aim is that a protocol this check accepts never fails a run for a reason the check
could have seen: with the plugin host it also compares every ``tooling`` and
``coder_config`` key with the settings the named plugin declares, and it refuses a
dispatching mode that lacks a validator in either phase (every run would halt).
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Iterable
from typing import Literal

from attrs import frozen

from snodo.base.convert import did_you_mean
from snodo.base.errors import PluginError, ProtocolError
from snodo.plugin.host import KNOWN_PROVIDERS, PluginHost
from snodo.protocol.capabilities import ALWAYS_EXCLUSIVE, CAPABILITY_TOOLS, known_capabilities
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


def located(violations: Iterable[Violation], text: str, source: str) -> list[Violation]:
    """``violations`` with the file and line of the field each names (``@ validators[2].tooling``)
    in front, the way the strict loader words its problems: ``file:line: message @ field``;
    a violation about the protocol as a whole names no field and stays as it is."""
    from snodo.protocol.yamldoc import compose, line_of  # noqa: PLC0415 YAML parsed only for a located violation

    try:
        root = compose(text, source, len(text))[0]
    except ProtocolError:  # the loader refused the text already; nothing to point into
        root = None
    out = []
    for v in violations:
        field = _FIELD.search(v.message)
        line = line_of(root, "." + field.group(1)) if field is not None and root is not None else None
        out.append(Violation(rule=v.rule, level=v.level, message=f"{source}:{line}: {v.message}") if line else v)
    return out


def _dupes(ids: list[str]) -> list[str]:
    return sorted(i for i, n in Counter(ids).items() if n > 1)


def _all_constraints(p: Protocol) -> list[tuple[str, Constraint]]:
    found = [(f"global_constraints[{i}]", c) for i, c in enumerate(p.global_constraints)]
    for mi, m in enumerate(p.modes):
        found += [(f"modes[{mi}] ({m.mode_id}).constraints[{i}]", c) for i, c in enumerate(m.constraints)]
    for vi, v in enumerate(p.validators):
        found += [(f"validators[{vi}] ({v.validator_id}).constraints[{i}]", c) for i, c in enumerate(v.constraints)]
    return found


def _missing(kind: str, name: str, installed: list[str]) -> str:
    """``no coder named 'x' is installed (did you mean …?); installed: …; hint``."""
    provider = KNOWN_PROVIDERS.get(name)
    how = (
        f"it is provided by the distribution {provider!r}; reinstall it"
        if provider
        else "install the plugin that provides it, then check `snodo plugins`"
    )
    return (
        f"no {kind} named {name!r} is installed{did_you_mean(name, installed)}; "
        f"installed: {', '.join(sorted(installed)) or 'none'} ({how})"
    )


def _plain(exc: Exception) -> str:
    message = getattr(exc, "message", str(exc))
    hint = getattr(exc, "hint", None)
    return f"{message} ({hint})" if hint else str(message)


def check(protocol: Protocol, host: PluginHost | None = None) -> list[Violation]:
    """Run every rule; ``host`` enables the plugin checks of WF3 and WF5.

    Violations come in rule order (CAP, ID, WF1 to WF5, EXEC), each rule's in document order."""
    p = protocol
    out = [*_known_capabilities(p), *_unique_ids(p), *_wf1_exclusive(p), *_wf2_roles(p), *_wf3_references(p)]
    if host is not None:
        out += _plugin_checks(p, host)
    return [*out, *_wf4_policy_fits(p), *_wf5_constraints(p, host), *_sandbox_off(p)]


def _known_capabilities(p: Protocol) -> list[Violation]:
    """CAP: every capability a mode grants, and every ``exclusive_tools`` entry, is known."""
    out: list[Violation] = []
    known = known_capabilities()
    for mi, m in enumerate(p.modes):
        for ti, cap in enumerate(m.tools):
            if cap not in CAPABILITY_TOOLS:
                out.append(
                    Violation(
                        rule="CAP",
                        message=(
                            f"mode {m.mode_id!r} grants unknown capability {cap!r}{did_you_mean(cap, known)} "
                            f"@ modes[{mi}].tools[{ti}]; known capabilities: {', '.join(known)}"
                        ),
                    )
                )
    for cap in p.exclusive_tools:
        if cap not in CAPABILITY_TOOLS:
            out.append(
                Violation(
                    rule="CAP",
                    message=(
                        f"exclusive_tools names unknown capability {cap!r}{did_you_mean(cap, known)}; "
                        f"known capabilities: {', '.join(known)}"
                    ),
                )
            )
    return out


def _unique_ids(p: Protocol) -> list[Violation]:
    """ID: mode and validator ids are unique, so that references to them mean anything."""
    return [
        Violation(rule="ID", message=f"{kind} {d!r} is declared more than once")
        for kind, ids in (
            ("mode_id", [m.mode_id for m in p.modes]),
            ("validator_id", [v.validator_id for v in p.validators]),
        )
        for d in _dupes(ids)
    ]


def _wf1_exclusive(p: Protocol) -> list[Violation]:
    """WF1: an exclusive tool is held by at most one mode."""
    out: list[Violation] = []
    for cap in sorted({*ALWAYS_EXCLUSIVE, *p.exclusive_tools}):
        holders = [m.mode_id for m in p.modes if cap in m.tools]
        if len(holders) > 1:
            out.append(
                Violation(
                    rule="WF1",
                    message=(
                        f"exclusive capability {cap!r} is held by {len(holders)} modes: {', '.join(holders)} "
                        "(at most one mode may hold it)"
                    ),
                )
            )
    return out


def _wf2_roles(p: Protocol) -> list[Violation]:
    """WF2: role ids are unique, and roles name existing modes."""
    out = [
        Violation(rule="WF2", message=f"role_id {d!r} is declared more than once")
        for d in _dupes([r.role_id for r in p.roles])
    ]
    mode_ids = {m.mode_id for m in p.modes}
    for r in p.roles:
        for mid in r.modes:
            if mid not in mode_ids:
                out.append(
                    Violation(
                        rule="WF2",
                        message=f"role {r.role_id!r} names unknown mode {mid!r}{did_you_mean(mid, mode_ids)}",
                    )
                )
    return out


def _wf3_references(p: Protocol) -> list[Violation]:
    """WF3 without the plugin host: a mode's validators and transitions resolve, a dispatching
    mode is gated in both phases, and ``initial_mode`` is a declared mode."""
    out: list[Violation] = []
    mode_ids = {m.mode_id for m in p.modes}
    validator_ids = {v.validator_id for v in p.validators}
    for m in p.modes:
        for vid in m.validators:
            if vid not in validator_ids:
                out.append(
                    Violation(
                        rule="WF3",
                        message=(
                            f"mode {m.mode_id!r} names validator {vid!r}, which is not declared"
                            f"{did_you_mean(vid, validator_ids)} "
                            f"(declared: {', '.join(sorted(validator_ids)) or 'none'})"
                        ),
                    )
                )
        for t in m.transitions:
            if t.to not in mode_ids:
                out.append(
                    Violation(
                        rule="WF3",
                        message=(
                            f"mode {m.mode_id!r} has a transition to unknown mode {t.to!r}"
                            f"{did_you_mean(t.to, mode_ids)}"
                        ),
                    )
                )
        if "dispatch" in m.tools:
            out += _wf3_ungated_phases(p, m)
    if p.initial_mode is not None and p.initial_mode not in mode_ids:
        out.append(
            Violation(
                rule="WF3",
                message=(
                    f"initial_mode {p.initial_mode!r} is not a declared mode{did_you_mean(p.initial_mode, mode_ids)} "
                    f"({', '.join(sorted(mode_ids))})"
                ),
            )
        )
    return out


def _wf3_ungated_phases(p: Protocol, m: Mode) -> list[Violation]:
    """A dispatching mode with no validator in a phase would halt every run at that phase."""
    out: list[Violation] = []
    for phase in PHASES:
        if not p.validators_for(m, phase):
            role = "gate the work before it starts" if phase == "pre_execute" else "judge the work once done"
            out.append(
                Violation(
                    rule="WF3",
                    message=(
                        f"mode {m.mode_id!r} holds 'dispatch' but has no {phase} validator to {role}: "
                        f"every run in this mode would halt (validator_error) at {phase}; add a "
                        f"{phase} validator to the mode's validators"
                    ),
                )
            )
    return out


def _wf4_policy_fits(p: Protocol) -> list[Violation]:
    """WF4: the disagreement policy fits the validator count."""
    n = len(p.validators)
    if p.disagreement_policy == "majority" and n < 2:
        return [
            Violation(
                rule="WF4",
                message=(f"disagreement_policy 'majority' needs at least 2 validators, the protocol declares {n}"),
            )
        ]
    if p.disagreement_policy == "quorum" and n < 3:
        return [
            Violation(
                rule="WF4",
                level="warning",
                message=(
                    f"disagreement_policy 'quorum' with {n} validator(s) degenerates to unanimity; declare 3 or more"
                ),
            )
        ]
    return []


def _wf5_constraints(p: Protocol, host: PluginHost | None) -> list[Violation]:
    """WF5: constraint ids are unique and, with the plugin host, every predicate is registered."""
    constraints = _all_constraints(p)
    out = [
        Violation(rule="WF5", message=f"constraint_id {d!r} is declared more than once")
        for d in _dupes([c.constraint_id for _, c in constraints])
    ]
    if host is None:
        return out
    registered = set(host.predicates())
    for where, c in constraints:
        if c.predicate not in registered:
            out.append(
                Violation(
                    rule="WF5",
                    message=(
                        f"constraint {c.constraint_id!r} at {where} names unknown predicate {c.predicate!r}"
                        f"{did_you_mean(c.predicate, registered)} "
                        f"(registered: {', '.join(sorted(registered)) or 'none'})"
                    ),
                )
            )
    return out


def _sandbox_off(p: Protocol) -> list[Violation]:
    """EXEC: confinement switched off is allowed, but never quietly."""
    if p.execution.sandbox != "off":
        return []
    return [
        Violation(
            rule="EXEC",
            level="warning",
            message=(
                "execution.sandbox is 'off': tests, validator commands and in-place coders will run "
                "agent-written code unconfined, with your user's full access; each such run is audited "
                "(see docs/security.md)"
            ),
        )
    ]


def _plugin_checks(p: Protocol, host: PluginHost) -> list[Violation]:
    """WF3 with the plugin host: installed plugins, and only the settings each declares."""
    out: list[Violation] = []
    used = {vid for m in p.modes for vid in m.validators}
    validator_types = list(host.validators())
    for vi, v in enumerate(p.validators):
        try:
            vspec = host.validator(v.validator_type)
        except PluginError as exc:
            why = (
                _plain(exc)
                if v.validator_type in validator_types
                else _missing("validator type", v.validator_type, validator_types)
            )
            out.append(
                Violation(rule="WF3", message=f"validator {v.validator_id!r}: {why} @ validators[{vi}].validator_type")
            )
            continue
        for key, message in tooling_problems(v.validator_id, v.validator_type, vspec.settings, v.tooling):
            out.append(Violation(rule="WF3", message=f"{message} @ validators[{vi}].tooling.{key}"))
        if vspec.needs_model and v.model is None and v.validator_id in used:
            users = ", ".join(m.mode_id for m in p.modes if v.validator_id in m.validators)
            out.append(
                Violation(
                    rule="WF3",
                    message=(
                        f"validator {v.validator_id!r} (type {v.validator_type}) is judged by a model but sets no "
                        f"`model`: it would report validator_error on every run of mode(s) {users}; set `model` "
                        f"(e.g. openai/gpt-4o-mini) or remove it from those modes @ validators[{vi}].model"
                    ),
                )
            )
    coders = list(host.coders())
    for mi, m in enumerate(p.modes):
        try:
            cspec = host.coder(m.coder)
        except PluginError as exc:
            why = _plain(exc) if m.coder in coders else _missing("coder", m.coder, coders)
            out.append(Violation(rule="WF3", message=f"mode {m.mode_id!r} coder: {why} @ modes[{mi}].coder"))
            continue
        for key, message in coder_config_problems(m.coder, cspec.capabilities.settings, m.coder_config):
            out.append(Violation(rule="WF3", message=f"mode {m.mode_id!r}: {message} @ modes[{mi}].coder_config.{key}"))
    return out
