"""What a tool checking plugins imports (the conformance kit, plugin tests): the engine's own
machinery, not a model of it; nothing in snodo imports this module."""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from attrs import evolve

from snodo.base.errors import EnvironmentProblem, PluginError, SnodoError
from snodo.governance.policy import ValidatorResult, classify
from snodo.governance.runner import PhaseInput, run_phase
from snodo.plugin.host import PluginHost, get_plugin_manager
from snodo.plugin.planning import PlannerImpl
from snodo.plugin.records import ValidationRequest
from snodo.protocol.loader import parse_protocol
from snodo.protocol.models import Protocol as ProtocolDocument
from snodo.sandbox import SandboxPolicy, choose_backend, confined


def run_validator(host: PluginHost, request: ValidationRequest) -> ValidatorResult:
    """What the shared runner reports for ``request``, as the engine gets it (timeout,
    ``severity_cap``, ``None`` or a crash as an ``error`` result)."""
    v = request.validator
    inp = PhaseInput(
        protocol=evolve(request.protocol, validators=(v,), global_constraints=()),
        mode=evolve(request.mode, validators=(v.validator_id,), constraints=()),
        phase=request.phase,
        task_id=request.task_id,
        task_spec=request.task_spec,
        workspace=request.workspace,
        changed_files=request.changed_files,
    )
    results = run_phase(host, inp)
    if len(results) != 1:
        raise ValueError(f"validator {v.validator_id!r} is not run in phase {request.phase!r} ({v.evaluation_phase})")
    return results[0]


def run_status(results: Sequence[ValidatorResult], policy: str = "any") -> str:
    """The status the outcome policy ``policy`` gives a phase with these results
    (``pass``, ``escalate``, ``blocker`` or ``validator_error``)."""
    return classify(results, policy=policy).status


def parse_protocol_document(document: Mapping[str, Any], *, source: str = "<document>") -> ProtocolDocument:
    """``document`` (a protocol as a mapping) read by the strict loader every command uses."""
    return parse_protocol(json.dumps(document), source=source)


@contextmanager
def confined_as_a_coder(
    workspace: Path, *, network: bool, read_only: Sequence[str] = ()
) -> Iterator[SandboxPolicy | None]:
    """Confine every child :func:`run_process` starts in this block as a coder's ``generate``
    is (``workspace`` writable but not ``read_only``); yields the policy, or ``None`` when no
    confinement backend works here."""
    try:
        choose_backend()
    except EnvironmentProblem:
        policy = None
    else:
        policy = SandboxPolicy(workspace=workspace, read_only=tuple(read_only), network=network)
    with confined(policy):
        yield policy


__all__ = [
    "PlannerImpl",
    "PluginError",
    "PluginHost",
    "ProtocolDocument",
    "SnodoError",
    "ValidatorResult",
    "confined_as_a_coder",
    "get_plugin_manager",
    "parse_protocol_document",
    "run_status",
    "run_validator",
]
