"""The ONE validator runner (ADR 015): a phase's validators through the ``snodo_validate``
hook, concurrently, failing closed (whatever is no verdict is an ``error``); constraints veto."""

from __future__ import annotations

import contextvars
import os
import queue
import threading
import time
from collections import deque
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Literal

from attrs import evolve, frozen

from snodo.base.errors import EnvironmentProblem
from snodo.base.frozen import thaw
from snodo.git.runner import is_commit_id, run_git
from snodo.governance.policy import ValidatorResult, cap
from snodo.judging.copies import Copy, Snapshot
from snodo.judging.tree import resolve
from snodo.plugin.host import PluginHost
from snodo.plugin.records import JudgedWork, PredicateContext, ValidationRequest, WorkspaceStatus
from snodo.protocol.models import Constraint, Mode, Protocol, Validator
from snodo.sandbox import SandboxPolicy, choose_backend, confined
from snodo.workspace.gitmeta import GitMetadataRefused, GitMetaWatch

ProgressFn = Callable[[str, ValidatorResult | None], None]

#: How long the waiting thread sleeps at most between looks at its validators and signals.
_SLICE = 0.2

#: A phase overlaps at least this many validators, whatever the CPU count (they mostly wait).
MIN_CONCURRENCY = 4
_CPUS = os.cpu_count() or 1  # it reads a file under /sys: once


def _grace(timeout: float) -> float:
    """Extra time before the runner gives up, for a validator to report its own timeout."""
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
    sandbox: SandboxPolicy | None = None  # confines every process a validator or predicate starts
    project_root: Path | None = None
    #: The tree's uncommitted state when the caller knows it (``()``: a clean copy); ``None``: asked of git
    uncommitted: tuple[str, ...] | None = None
    work: JudgedWork | None = None


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


def uncommitted(workspace: Path) -> tuple[str, ...]:
    """``git status --porcelain`` of ``workspace`` by snodo's own git; none outside git."""
    try:
        found = run_git(workspace, "--no-optional-locks", "status", "--porcelain")
    except EnvironmentProblem:
        return ()
    return tuple(line for line in found.stdout.splitlines() if line.strip()) if found.ok else ()


def _run_one(
    host: PluginHost, v: Validator, inp: PhaseInput, status: WorkspaceStatus, workspace: Path | None = None
) -> ValidatorResult:
    started = time.monotonic()
    request = ValidationRequest(
        validator=v,
        task_id=inp.task_id,
        task_spec=inp.task_spec,
        phase=inp.phase,
        mode=inp.mode,
        protocol=inp.protocol,
        workspace=workspace or inp.workspace,
        changed_files=inp.changed_files,
        diff=inp.diff,
        project_root=inp.project_root or inp.workspace,
        timeout=v.timeout,
        status=status,
        work=inp.work,
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
        escalate=bool(verdict.escalate) and severity != "blocker",
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
    return (*protocol.global_constraints, *mode.constraints, *(c for v in validators for c in v.constraints))


def concurrency_limit(count: int) -> int:
    """How many validators of a phase run at once by default: all, up to the CPUs, at least :data:`MIN_CONCURRENCY`."""
    return max(1, min(count, max(MIN_CONCURRENCY, _CPUS)))


def run_phase(
    host: PluginHost, inp: PhaseInput, *, progress: ProgressFn | None = None, limit: int | None = None
) -> list[ValidatorResult]:
    """The mode's validators for ``inp.phase``, ``limit`` at once, each in a copy of the caller's
    context (sandbox policy, MCP call scope), then its constraints; results in declared order."""
    validators = inp.protocol.validators_for(inp.mode, inp.phase)
    known = inp.uncommitted  # read once, if a validator asks (none when the caller knows it)
    status = WorkspaceStatus(lambda: uncommitted(inp.workspace) if known is None else known)
    try:
        snapshot: Snapshot | str | None = _snapshot(host, inp, validators)
    except (OSError, EnvironmentProblem) as exc:  # fails closed: no copy, no verdict
        snapshot = f"could not take a snapshot of the judged tree: {exc}"
    planted: list[tuple[str, str]] = []  # (path, reason) from every validator's copy

    def work(v: Validator) -> ValidatorResult:
        if snapshot is None or _declared(host, v, "judges_objects", unknown=False):
            with confined(inp.sandbox):
                return _run_one(host, v, inp, status)
        return _run_in_copy(host, v, inp, status, snapshot, planted)

    try:
        width = concurrency_limit(len(validators)) if limit is None else max(1, limit)
        results = _in_declared_order(validators, work, width, inp.phase, progress)
        if planted:  # the phase earns nothing; the caller records and refuses each path
            raise GitMetadataRefused(sorted(planted))
        constraints = constraints_for(inp.protocol, inp.mode, validators)
        if isinstance(snapshot, Snapshot) and constraints:
            # predicates read files too: they see the same snapshot (one copy, run one by one)
            where = snapshot.copy("constraints", overlay=_overlays(inp.sandbox, snapshot))
            inp = evolve(inp, workspace=where.path, sandbox=_moved_to(inp.sandbox, where, snapshot))
        return results + run_constraints(host, constraints, inp, progress=progress)
    finally:
        if isinstance(snapshot, Snapshot):
            snapshot.close()


def _run_in_copy(
    host: PluginHost,
    v: Validator,
    inp: PhaseInput,
    status: WorkspaceStatus,
    snapshot: Snapshot | str,
    planted: list[tuple[str, str]],
) -> ValidatorResult:
    """``v`` judging in its own copy of the snapshot when it runs code (planted git metadata goes to ``planted``)."""
    started = time.monotonic()
    own = _declared(host, v, "runs_code", unknown=True)
    try:
        if isinstance(snapshot, str):
            raise EnvironmentProblem(snapshot)
        copy = snapshot.copy(v.validator_id, overlay=_overlays(inp.sandbox, snapshot)) if own else snapshot.shared()
        policy = _moved_to(inp.sandbox, copy if own else Copy(snapshot.empty()), snapshot)
    except (OSError, EnvironmentProblem) as exc:
        return _error(v.validator_id, v.validator_type, f"no copy of the judged tree to judge in: {exc}", started)
    watch = GitMetaWatch(copy.writes, throwaway=True) if own else None
    try:
        with confined(policy):
            result = _run_one(host, v, inp, status, copy.path)
        if watch is not None:
            planted.extend(watch.intruders())
        return result
    finally:
        snapshot.remove(copy)


def _in_declared_order(
    validators: Sequence[Validator],
    work: Callable[[Validator], ValidatorResult],
    width: int,
    phase: str,
    progress: ProgressFn | None,
) -> list[ValidatorResult]:
    """``work`` for every validator, ``width`` at once in declared order, each on a daemon thread
    (an abandoned one never keeps the process from exiting), bounded by its timeout."""
    slots: dict[int, ValidatorResult] = {}
    finished: queue.SimpleQueue[tuple[int, ValidatorResult]] = queue.SimpleQueue()
    running: dict[int, float] = {}  # index -> deadline
    waiting = deque(enumerate(validators))
    reported = 0

    def job(i: int, v: Validator) -> None:
        finished.put((i, work(v)))

    while waiting or running:
        while waiting and len(running) < width:
            i, v = waiting.popleft()
            if progress:
                progress(f"{phase}: running {v.validator_id} ({v.validator_type})", None)
            running[i] = time.monotonic() + v.timeout + _grace(v.timeout)
            ctx = contextvars.copy_context()
            threading.Thread(target=ctx.run, args=(job, i, v), name="snodo-validator", daemon=True).start()
        try:
            # in slices: a signal delivered to a validator's thread is acted on only when this main thread runs
            i, result = finished.get(timeout=min(_SLICE, max(0.0, min(running.values()) - time.monotonic())))
        except queue.Empty:
            slots.update(_expired(running, validators))
        else:
            if running.pop(i, None) is not None:  # a verdict after its deadline stays a timeout
                slots[i] = result
        reported = _report(slots, reported, validators, phase, progress)
    return [slots[i] for i in range(len(validators))]


def _report(
    slots: dict[int, ValidatorResult], at: int, validators: Sequence[Validator], phase: str, progress: ProgressFn | None
) -> int:
    """Progress for the results in from ``at`` on, in declared order (audit events are deterministic); the next."""
    while at in slots:
        if progress:
            progress(f"{phase}: {validators[at].validator_id} → {slots[at].severity}", slots[at])
        at += 1
    return at


def _expired(running: dict[int, float], validators: Sequence[Validator]) -> dict[int, ValidatorResult]:
    """Timeout errors for the running validators past their deadline (taken off ``running``)."""
    now = time.monotonic()
    out = {}
    for i in [i for i, deadline in running.items() if deadline <= now]:
        v = validators[i]
        started = running.pop(i) - v.timeout - _grace(v.timeout)
        out[i] = _error(v.validator_id, v.validator_type, f"timed out after {v.timeout:g}s without a verdict", started)
    return out


def _moved_to(policy: SandboxPolicy | None, copy: Copy, snapshot: Snapshot) -> SandboxPolicy | None:
    """The phase's confinement with ``copy`` as the only writable tree."""
    if policy is None:
        return None
    overlay = (copy.upper, copy.work) if copy.upper is not None and copy.work is not None else None
    interpreters = (*policy.interpreters, *snapshot.environments.values())
    return evolve(policy, workspace=copy.path, interpreters=interpreters, overlay=overlay)


def _overlays(policy: SandboxPolicy | None, snapshot: Snapshot) -> bool:
    """Whether a code-running validator's copy can be an overlay of the kept tree."""
    kept = snapshot.kept()
    if kept is None or policy is None or policy.mode == "off" or policy.read_only:
        return False
    try:
        backend = choose_backend()
    except EnvironmentProblem:
        return False
    return backend.overlays(kept.parent)


def _declared(host: PluginHost, v: Validator, attribute: str, *, unknown: bool) -> bool:
    """What ``v``'s type's :class:`~snodo.plugin.records.ValidatorSpec` declares; ``unknown`` for an unknown type."""
    try:
        return bool(getattr(host.validator(v.validator_type), attribute))
    except Exception:
        return unknown


def _snapshot(host: PluginHost, inp: PhaseInput, validators: Sequence[Validator]) -> Snapshot | None:
    """The judged tree, read once when the phase starts (SPEC §3); ``None``: no validator reads it, or outside git."""
    work = inp.work
    if work is None or all(_declared(host, v, "judges_objects", unknown=False) for v in validators):
        return None
    tree = work.tree()
    if not tree:
        return None
    base = work.base
    head = base if base is None or is_commit_id(base) else resolve(work.repo, base)
    return Snapshot(work.repo, tree, base=head, project_root=inp.project_root or inp.workspace)


def run_constraints(
    host: PluginHost, constraints: Sequence[Constraint], inp: PhaseInput, *, progress: ProgressFn | None = None
) -> list[ValidatorResult]:
    """Evaluate ``constraints`` one by one, each confined: the one place a predicate runs."""
    results = []
    for c in constraints:
        with confined(inp.sandbox):
            r = _run_constraint(host, c, inp)
        results.append(r)
        if progress:
            progress(f"{inp.phase}: constraint {c.constraint_id} → {r.severity}", r)
    return results
