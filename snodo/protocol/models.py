"""The protocol document as frozen attrs records (SPEC §2).

Collections are tuples so a loaded protocol cannot be mutated by anyone holding it;
free-form settings handed to plugins (``tooling``, ``coder_config``, ``params``,
``metadata``) stay plain mappings because only the plugin knows their shape.
"""

from __future__ import annotations

from typing import Any, Literal

from attrs import Factory, field, frozen

Severity = Literal["pass", "warn", "blocker"]
Phase = Literal["pre_execute", "post_execute"]
Policy = Literal["unanimous", "majority", "quorum", "any"]

PHASES: tuple[str, ...] = ("pre_execute", "post_execute")
POLICIES: tuple[str, ...] = ("unanimous", "majority", "quorum", "any")


@frozen(kw_only=True)
class Constraint:
    constraint_id: str
    predicate: str
    description: str = ""
    params: dict[str, Any] = Factory(dict)
    severity: Severity = "blocker"


@frozen(kw_only=True)
class Transition:
    """A declared move from one mode to another; ``on`` names the event that allows it."""

    to: str
    on: str = ""
    description: str = ""


@frozen(kw_only=True)
class Mode:
    mode_id: str
    name: str = ""
    description: str = ""
    tools: tuple[str, ...] = ()
    validators: tuple[str, ...] = ()
    transitions: tuple[Transition, ...] = ()
    constraints: tuple[Constraint, ...] = ()
    coder: str = "litellm"
    coder_config: dict[str, Any] = Factory(dict)


@frozen(kw_only=True)
class Validator:
    validator_id: str
    validator_type: str
    evaluation_phase: Phase = "pre_execute"
    criteria: tuple[str, ...] = ()
    tooling: dict[str, Any] = Factory(dict)
    model: str | None = None
    constraints: tuple[Constraint, ...] = ()
    severity_cap: Severity | None = None

    @property
    def timeout(self) -> float:
        """Seconds the runner grants this validator (``tooling.timeout``, default 300)."""
        value = self.tooling.get("timeout", 300)
        return float(value) if isinstance(value, int | float) and not isinstance(value, bool) else 300.0


@frozen(kw_only=True)
class Role:
    role_id: str
    name: str = ""
    description: str = ""
    modes: tuple[str, ...] = ()


@frozen(kw_only=True)
class Execution:
    max_iterations: int = 50
    max_recovery_depth: int = 3
    max_total_fix_attempts: int = 10
    # Confined execution of agent-written content: "auto" picks a working backend and fails
    # closed without one; "off" runs unconfined (warned about, audited per execution).
    sandbox: Literal["auto", "off"] = "auto"
    max_parallel_jobs: int = 2


def _positive_fraction(_inst: object, _attr: object, value: float) -> None:
    if not 0 < value <= 1:
        raise ValueError(f"must be a fraction in (0, 1], got {value}")


@frozen(kw_only=True)
class Protocol:
    protocol_id: str
    name: str
    version: str = "1.0.0"
    modes: tuple[Mode, ...]
    validators: tuple[Validator, ...]
    disagreement_policy: Policy = "unanimous"
    quorum_threshold: float = field(default=2 / 3, validator=_positive_fraction)
    initial_mode: str | None = None
    roles: tuple[Role, ...] = ()
    global_constraints: tuple[Constraint, ...] = ()
    exclusive_tools: tuple[str, ...] = ()
    protected_paths: tuple[str, ...] = ()
    execution: Execution = Factory(Execution)
    metadata: dict[str, Any] = Factory(dict)

    @property
    def start_mode(self) -> str:
        return self.initial_mode or self.modes[0].mode_id

    def mode(self, mode_id: str) -> Mode:
        for m in self.modes:
            if m.mode_id == mode_id:
                return m
        known = ", ".join(m.mode_id for m in self.modes)
        from snodo.errors import ProtocolError

        raise ProtocolError(f"unknown mode {mode_id!r}; this protocol defines: {known}")

    def validator(self, validator_id: str) -> Validator | None:
        for v in self.validators:
            if v.validator_id == validator_id:
                return v
        return None

    def validators_for(self, mode: Mode, phase: str) -> tuple[Validator, ...]:
        """The mode's validators for one phase, in the order the mode declares them."""
        found = (self.validator(vid) for vid in mode.validators)
        return tuple(v for v in found if v is not None and v.evaluation_phase == phase)
