"""Well-formedness rules WF1–WF5 (SPEC §2), checked at every load.

Every rule runs and every violation is reported together, each naming its rule and the
culprits, so an author fixes a protocol in one pass instead of one error at a time.
"""

from __future__ import annotations

from collections import Counter
from typing import TYPE_CHECKING, Literal

from attrs import frozen

from snodo.protocol.capabilities import ALWAYS_EXCLUSIVE, CAPABILITY_TOOLS, known_capabilities
from snodo.protocol.models import Constraint, Protocol

if TYPE_CHECKING:
    from snodo.plugins import PluginHost


@frozen(kw_only=True)
class Violation:
    rule: str
    message: str
    level: Literal["error", "warning"] = "error"

    def __str__(self) -> str:
        return f"{self.rule}: {self.message}" if self.level == "error" else f"{self.rule} (warning): {self.message}"

    def as_json(self) -> dict[str, str]:
        return {"rule": self.rule, "level": self.level, "message": self.message}


def _dupes(ids: list[str]) -> list[str]:
    return sorted(i for i, n in Counter(ids).items() if n > 1)


def _all_constraints(p: Protocol) -> list[tuple[str, Constraint]]:
    found = [(f"global_constraints[{i}]", c) for i, c in enumerate(p.global_constraints)]
    for mi, m in enumerate(p.modes):
        found += [(f"modes[{mi}] ({m.mode_id}).constraints[{i}]", c) for i, c in enumerate(m.constraints)]
    for vi, v in enumerate(p.validators):
        found += [(f"validators[{vi}] ({v.validator_id}).constraints[{i}]", c) for i, c in enumerate(v.constraints)]
    return found


def _plain(exc: Exception) -> str:
    message = getattr(exc, "message", str(exc))
    hint = getattr(exc, "hint", None)
    return f"{message} ({hint})" if hint else str(message)


def check(protocol: Protocol, host: PluginHost | None = None) -> list[Violation]:
    """Run every rule; ``host`` enables the plugin checks of WF3 and WF5."""
    p = protocol
    out: list[Violation] = []
    known = known_capabilities()

    # Known capabilities (and known exclusive_tools).
    for mi, m in enumerate(p.modes):
        for ti, cap in enumerate(m.tools):
            if cap not in CAPABILITY_TOOLS:
                out.append(
                    Violation(
                        rule="CAP",
                        message=(
                            f"mode {m.mode_id!r} grants unknown capability {cap!r} @ modes[{mi}].tools[{ti}]; "
                            f"known capabilities: {', '.join(known)}"
                        ),
                    )
                )
    for cap in p.exclusive_tools:
        if cap not in CAPABILITY_TOOLS:
            out.append(
                Violation(
                    rule="CAP",
                    message=(
                        f"exclusive_tools names unknown capability {cap!r}; known capabilities: {', '.join(known)}"
                    ),
                )
            )

    # Identifiers must be unique for references to mean anything.
    for kind, ids in (
        ("mode_id", [m.mode_id for m in p.modes]),
        ("validator_id", [v.validator_id for v in p.validators]),
    ):
        for d in _dupes(ids):
            out.append(Violation(rule="ID", message=f"{kind} {d!r} is declared more than once"))

    # WF1: an exclusive tool is held by at most one mode.
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

    # WF2: role ids are unique, and roles name existing modes.
    for d in _dupes([r.role_id for r in p.roles]):
        out.append(Violation(rule="WF2", message=f"role_id {d!r} is declared more than once"))
    mode_ids = {m.mode_id for m in p.modes}
    for r in p.roles:
        for mid in r.modes:
            if mid not in mode_ids:
                out.append(Violation(rule="WF2", message=f"role {r.role_id!r} names unknown mode {mid!r}"))

    # WF3: references resolve; dispatching modes are gated; plugins are installed.
    validator_ids = {v.validator_id for v in p.validators}
    for m in p.modes:
        for vid in m.validators:
            if vid not in validator_ids:
                out.append(
                    Violation(
                        rule="WF3",
                        message=(
                            f"mode {m.mode_id!r} names validator {vid!r}, which is not declared "
                            f"(declared: {', '.join(sorted(validator_ids)) or 'none'})"
                        ),
                    )
                )
        for t in m.transitions:
            if t.to not in mode_ids:
                out.append(
                    Violation(rule="WF3", message=f"mode {m.mode_id!r} has a transition to unknown mode {t.to!r}")
                )
        if "dispatch" in m.tools:
            pre = [v for v in p.validators_for(m, "pre_execute")]
            if not pre:
                out.append(
                    Violation(
                        rule="WF3",
                        message=(f"mode {m.mode_id!r} holds 'dispatch' but has no pre_execute validator to gate it"),
                    )
                )
    if p.initial_mode is not None and p.initial_mode not in mode_ids:
        out.append(
            Violation(
                rule="WF3",
                message=(f"initial_mode {p.initial_mode!r} is not a declared mode ({', '.join(sorted(mode_ids))})"),
            )
        )
    if host is not None:
        from snodo.errors import PluginError

        for v in p.validators:
            try:
                host.validator(v.validator_type)
            except PluginError as exc:
                out.append(Violation(rule="WF3", message=f"validator {v.validator_id!r}: {_plain(exc)}"))
        for m in p.modes:
            try:
                host.coder(m.coder)
            except PluginError as exc:
                out.append(Violation(rule="WF3", message=f"mode {m.mode_id!r} coder: {_plain(exc)}"))

    # WF4: the policy fits the validator count.
    n = len(p.validators)
    if p.disagreement_policy == "majority" and n < 2:
        out.append(
            Violation(
                rule="WF4",
                message=(f"disagreement_policy 'majority' needs at least 2 validators, the protocol declares {n}"),
            )
        )
    if p.disagreement_policy == "quorum" and n < 3:
        out.append(
            Violation(
                rule="WF4",
                level="warning",
                message=(
                    f"disagreement_policy 'quorum' with {n} validator(s) degenerates to unanimity; declare 3 or more"
                ),
            )
        )

    # WF5: constraint ids unique, predicates registered.
    constraints = _all_constraints(p)
    for d in _dupes([c.constraint_id for _, c in constraints]):
        out.append(Violation(rule="WF5", message=f"constraint_id {d!r} is declared more than once"))
    if host is not None:
        registered = set(host.predicates())
        for where, c in constraints:
            if c.predicate not in registered:
                out.append(
                    Violation(
                        rule="WF5",
                        message=(
                            f"constraint {c.constraint_id!r} at {where} names unknown predicate {c.predicate!r} "
                            f"(registered: {', '.join(sorted(registered)) or 'none'})"
                        ),
                    )
                )

    # Confinement switched off: allowed, but never silently (every unconfined run is audited).
    if p.execution.sandbox == "off":
        out.append(
            Violation(
                rule="sandbox",
                level="warning",
                message=(
                    "execution.sandbox is 'off': tests, validators and coders run agent-written code unconfined, "
                    "able to change .snodo/ and read snodo's keys; each such run is audited (docs/security.md)"
                ),
            )
        )
    return out
