"""The ONE validator runner (ADR 015), shared by the engine, the MCP server and ``snodo validate``.

It resolves a mode's validators for a phase, dispatches each through the ``snodo_validate``
hook concurrently, and fails closed: a crash, a timeout, a missing plugin or a non-answer
becomes an ``error`` result, never a pass. ``severity_cap`` lowers verdicts, never errors.
Constraints (predicates) are evaluated alongside as vetoes. Results keep declared order.
"""

from __future__ import annotations

import contextvars
import threading
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Literal

from attrs import frozen

from snodo.governance.policy import ValidatorResult, cap
from snodo.plugins import PluginHost
from snodo.protocol.models import Constraint, Mode, Protocol, Validator
from snodo.records import PredicateContext, ValidationRequest, thaw
from snodo.sandbox import SandboxPolicy, confined

ProgressFn = Callable[[str, ValidatorResult | None], None]


def _grace(timeout: float) -> float:
    """Extra time before the runner gives up, so a validator can report its own timeout."""
    return min(2.0, 0.25 + 0.05 * timeout)


@frozen(kw_only=True)
class PhaseInput:
    protocol: Protocol
    mode: Mode
    phase: str
    task_id: str
    task_spec: str
    workspace: Path
    changed_files: tuple[str, ...] = ()
    diff: str = ""
    # Every process a validator or predicate starts through snodo.api.run_process is confined by it.
    sandbox: SandboxPolicy | None = None
    project_root: Path | None = None


def _error(
    vid: str, vtype: str, message: str, started: float, *, kind: Literal["validator", "constraint"] = "validator"
) -> ValidatorResult:
    """The one shape of "could not judge": severity ``error``, which fails closed."""
    return ValidatorResult(
        validator_id=vid,
        validator_type=vtype,
        severity="error",
        justification=message,
        error=message,
        kind=kind,
        duration=time.monotonic() - started,
    )


def _run_one(host: PluginHost, v: Validator, inp: PhaseInput) -> ValidatorResult:
    started = time.monotonic()
    request = ValidationRequest(
        validator=v,
        task_id=inp.task_id,
        task_spec=inp.task_spec,
        phase=inp.phase,
        mode=inp.mode,
        protocol=inp.protocol,
        workspace=inp.workspace,
        changed_files=inp.changed_files,
        diff=inp.diff,
        project_root=inp.project_root,
        timeout=v.timeout,
    )
    try:
        verdict = host.validate(request)
    except Exception as exc:  # fail closed: any failure to judge is an error result
        return _error(v.validator_id, v.validator_type, f"{type(exc).__name__}: {exc}", started)
    if verdict is None:
        message = f"no plugin answered for validator type {v.validator_type!r}"
        return _error(v.validator_id, v.validator_type, message, started)
    severity, original = cap(verdict.severity, v.severity_cap)
    return ValidatorResult(
        validator_id=v.validator_id,
        validator_type=v.validator_type,
        severity=severity,  # type: ignore[arg-type]
        justification=verdict.justification,
        severity_original=original,
        details=thaw(verdict.details),
        duration=time.monotonic() - started,
    )


def _run_constraint(host: PluginHost, c: Constraint, inp: PhaseInput) -> ValidatorResult:
    started = time.monotonic()
    vid, vtype = f"constraint:{c.constraint_id}", f"predicate:{c.predicate}"
    ctx = PredicateContext(
        workspace=inp.workspace,
        task_id=inp.task_id,
        task_spec=inp.task_spec,
        phase=inp.phase,
        changed_files=inp.changed_files,
        diff=inp.diff,
    )
    try:
        result = host.check_predicate(c.predicate, ctx, c.params)
        ok, message = bool(result.ok), str(result.message)
    except Exception as exc:  # a predicate that cannot decide fails closed
        return _error(vid, vtype, f"{type(exc).__name__}: {exc}", started, kind="constraint")
    return ValidatorResult(
        validator_id=vid,
        validator_type=vtype,
        severity="pass" if ok else c.severity,
        justification=message or (c.description if ok else f"constraint {c.constraint_id} failed"),
        kind="constraint",
        duration=time.monotonic() - started,
    )


def constraints_for(protocol: Protocol, mode: Mode, validators: Sequence[Validator]) -> tuple[Constraint, ...]:
    found = [*protocol.global_constraints, *mode.constraints]
    for v in validators:
        found.extend(v.constraints)
    return tuple(found)


def run_phase(host: PluginHost, inp: PhaseInput, *, progress: ProgressFn | None = None) -> list[ValidatorResult]:
    """Run the mode's validators for ``inp.phase`` concurrently; results in declared order.

    Each validator runs in a daemon thread bounded by its ``tooling.timeout``; one that
    overruns is reported as an error and abandoned (subprocess-based validators kill their
    own process groups on timeout).
    """
    validators = inp.protocol.validators_for(inp.mode, inp.phase)
    slots: list[ValidatorResult | None] = [None] * len(validators)
    threads: list[tuple[threading.Thread, float]] = []

    def work(i: int, v: Validator) -> None:
        with confined(inp.sandbox):
            slots[i] = _run_one(host, v, inp)

    for i, v in enumerate(validators):
        if progress:
            progress(f"{inp.phase}: running {v.validator_id} ({v.validator_type})", None)
        # Each thread runs in a copy of this context: it carries the sandbox policy the caller set.
        ctx = contextvars.copy_context()
        t = threading.Thread(target=ctx.run, args=(work, i, v), name=f"snodo-validator-{v.validator_id}", daemon=True)
        t.start()
        threads.append((t, time.monotonic() + v.timeout + _grace(v.timeout)))

    results: list[ValidatorResult] = []
    for (t, deadline), v, i in zip(threads, validators, range(len(validators)), strict=True):
        t.join(max(0.0, deadline - time.monotonic()))
        slot = slots[i]
        if t.is_alive() or slot is None:
            message = f"timed out after {v.timeout:g}s without a verdict"
            slot = _error(v.validator_id, v.validator_type, message, deadline - v.timeout - _grace(v.timeout))
        results.append(slot)
        if progress:
            progress(f"{inp.phase}: {v.validator_id} → {slot.severity}", slot)

    results += run_constraints(host, constraints_for(inp.protocol, inp.mode, validators), inp, progress=progress)
    return results


def run_constraints(
    host: PluginHost, constraints: Sequence[Constraint], inp: PhaseInput, *, progress: ProgressFn | None = None
) -> list[ValidatorResult]:
    """Evaluate ``constraints`` one by one, each confined by ``inp.sandbox``: the one place a
    predicate runs (the engine's re-judging of kept work comes here too)."""
    results = []
    for c in constraints:
        with confined(inp.sandbox):
            r = _run_constraint(host, c, inp)
        results.append(r)
        if progress:
            progress(f"{inp.phase}: constraint {c.constraint_id} → {r.severity}", r)
    return results
