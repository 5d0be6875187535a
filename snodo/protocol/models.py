"""The protocol document as frozen attrs records (SPEC §2), frozen all the way down: no
plugin can change what the others, running concurrently, read."""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from typing import Annotated, Any, ClassVar, Literal

from attrs import Factory, field, frozen

from snodo.base.errors import ProtocolError
from snodo.base.frozen import freeze
from snodo.protocol.capabilities import ALWAYS_EXCLUSIVE, CAPABILITY_TOOLS
from snodo.rules.settings import RUNNER_SETTINGS

Severity = Literal["pass", "warn", "blocker"]
Phase = Literal["pre_execute", "post_execute"]
Policy = Literal["unanimous", "majority", "quorum", "any"]


@frozen
class Check:
    """``Annotated`` metadata: what a value must also be (the strict converter checks it)."""

    expected: str
    holds: Callable[[Any], bool]

    def problem(self, value: Any) -> str | None:
        return None if self.holds(value) else f"expected {self.expected}, got {value!r}"


@frozen
class Settings:
    """``Annotated`` metadata: the runner's own keys (``timeout``) checked at load; the plugin's, by WF3."""

    def key_problems(self, mapping: dict[str, Any]) -> list[tuple[str, str]]:
        out: list[tuple[str, str]] = []
        for setting in (s for s in RUNNER_SETTINGS if s in mapping):
            value = mapping[setting]
            problem = setting.problem(value) if value is not None else f"expected {setting.expected}, got NoneType None"
            if problem is not None:
                out.append((str(setting), problem))
        return out


AtLeastOne = Annotated[int, Check("an integer of at least 1", lambda v: v >= 1)]
Count = Annotated[int, Check("an integer of at least 0", lambda v: v >= 0)]
Fraction = Annotated[float, Check("a fraction in (0, 1]", lambda v: 0 < v <= 1)]  # NaN fails too
Version = Annotated[
    str, Check("a version MAJOR.MINOR.PATCH such as '1.0.0'", lambda v: re.fullmatch(r"[0-9]+\.[0-9]+\.[0-9]+", v))
]
PluginSettings = Annotated[dict[str, Any], Settings()]

PHASES: tuple[str, ...] = ("pre_execute", "post_execute")


@frozen(kw_only=True)
class Constraint:
    constraint_id: str
    predicate: str
    description: str = ""
    params: dict[str, Any] = field(factory=dict, converter=freeze)
    severity: Severity = "blocker"


@frozen(kw_only=True)
class Transition:
    to: str
    on: str = ""
    description: str = ""


@frozen(kw_only=True)
class Mode:
    #: the tools each capability grants, and the tools no capability grants (only naming them does)
    CAPABILITY_TOOLS: ClassVar[Mapping[str, tuple[str, ...]]] = CAPABILITY_TOOLS
    ALWAYS_EXCLUSIVE: ClassVar[tuple[str, ...]] = ALWAYS_EXCLUSIVE

    mode_id: str
    name: str = ""
    description: str = ""
    tools: tuple[str, ...] = ()
    validators: tuple[str, ...] = ()
    transitions: tuple[Transition, ...] = ()
    constraints: tuple[Constraint, ...] = ()
    coder: str = "litellm"
    coder_config: PluginSettings = field(factory=dict, converter=freeze)


@frozen(kw_only=True)
class Validator:
    validator_id: str
    validator_type: str
    evaluation_phase: Phase = "pre_execute"
    criteria: tuple[str, ...] = ()
    tooling: PluginSettings = field(factory=dict, converter=freeze)
    model: str | None = None
    constraints: tuple[Constraint, ...] = ()
    severity_cap: Severity | None = None

    @property
    def timeout(self) -> float:
        """Seconds the runner grants this validator (``tooling.timeout``, checked at load)."""
        return float(self.tooling.get("timeout", 300))


@frozen(kw_only=True)
class Role:
    role_id: str
    name: str = ""
    description: str = ""
    modes: tuple[str, ...] = ()


EnvName = Annotated[
    str,
    Check("an environment variable name such as 'DATABASE_URL'", lambda v: re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", v)),
]


@frozen(kw_only=True)
class Limits:
    """``execution.limits`` per confined process; 0 means no limit (SPEC §9)."""

    file_size_mb: Count = 16384
    processes: Count = 4096
    memory_mb: Count | None = None


@frozen(kw_only=True)
class Execution:
    max_iterations: AtLeastOne = 50
    max_recovery_depth: Count = 3
    max_total_fix_attempts: Count = 10
    # "auto" fails closed without a working backend; "off" is warned about and audited.
    sandbox: Literal["auto", "off"] = "auto"
    max_parallel_jobs: AtLeastOne = 2
    env: tuple[EnvName, ...] = ()
    limits: Limits = Factory(Limits)
    max_queued_jobs: AtLeastOne = 32
    python: str | None = None


@frozen(kw_only=True)
class Protocol:
    protocol_id: str
    name: str
    version: Version = "1.0.0"
    modes: tuple[Mode, ...]
    validators: tuple[Validator, ...]
    disagreement_policy: Policy = "unanimous"
    quorum_threshold: Fraction = 2 / 3
    initial_mode: str | None = None
    roles: tuple[Role, ...] = ()
    global_constraints: tuple[Constraint, ...] = ()
    exclusive_tools: tuple[str, ...] = ()
    protected_paths: tuple[str, ...] = ()
    execution: Execution = Factory(Execution)
    metadata: dict[str, Any] = field(factory=dict, converter=freeze)

    @property
    def start_mode(self) -> str:
        return self.initial_mode or self.modes[0].mode_id

    def mode(self, mode_id: str) -> Mode:
        for m in self.modes:
            if m.mode_id == mode_id:
                return m
        known = ", ".join(m.mode_id for m in self.modes)
        raise ProtocolError(f"unknown mode {mode_id!r}; this protocol defines: {known}")

    def cannot_run_tasks(self, mode_id: str) -> str | None:
        """Why mode ``mode_id`` may not run tasks (it lacks ``dispatch``), or None."""
        if "dispatch" in self.mode(mode_id).tools:
            return None
        able = [m.mode_id for m in self.modes if "dispatch" in m.tools]
        where = f"modes that can: {', '.join(able)}" if able else "no mode of this protocol holds it"
        return (
            f"mode {mode_id!r} does not hold the 'dispatch' capability, so it cannot run tasks ({where}); "
            "nothing was run. Choose a mode that holds it, or add 'dispatch' to the mode's tools "
            "(see docs/protocol.md)"
        )

    def validator(self, validator_id: str) -> Validator | None:
        return next((v for v in self.validators if v.validator_id == validator_id), None)

    def validators_for(self, mode: Mode, phase: str) -> tuple[Validator, ...]:
        """The mode's validators for one phase, in the order the mode declares them."""
        found = (self.validator(vid) for vid in mode.validators)
        return tuple(v for v in found if v is not None and v.evaluation_phase == phase)
