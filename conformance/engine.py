"""The pieces of the real engine the kit drives a plugin through, and the only snodo
internals the kit imports.

The kit checks a plugin against what snodo does, not against a model of it: a validator
request goes through the shared runner (its time limit, severity cap, crash-to-error) and
the outcome policy; the kit's one-mode protocol is parsed by the strict loader; a coder's
``generate`` runs under the confinement the engine sets. None of that is plugin interface,
so it is kept out of :mod:`snodo.api` and reached from here alone: the import contract in
pyproject.toml ("the kit imports snodo only through snodo.api") names this module as its
one exception.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from contextlib import AbstractContextManager
from pathlib import Path
from typing import Any

from attrs import evolve

from snodo.api import EnvironmentProblem, PluginHost, ProtocolDocument, ValidationRequest
from snodo.governance.policy import ValidatorResult, classify
from snodo.governance.runner import PhaseInput, run_phase
from snodo.protocol.loader import parse_protocol
from snodo.sandbox import SandboxPolicy, choose_backend, confined

from ._support import PROTECTED_DIR


def parse_kit_protocol(document: Mapping[str, Any]) -> ProtocolDocument:
    """The kit's protocol, parsed by the real strict loader (it raises what a user would see)."""
    return parse_protocol(json.dumps(document), source="snodo_validator_config")


def run_through_runner(host: PluginHost, request: ValidationRequest) -> list[ValidatorResult]:
    """What the shared runner reports for this one request: what the engine acts on.

    Bounded: the runner abandons a validator at its ``tooling.timeout``."""
    inp = PhaseInput(
        protocol=evolve(request.protocol, validators=(request.validator,)),
        mode=request.mode,
        phase=request.phase,
        task_id=request.task_id,
        task_spec=request.task_spec,
        workspace=request.workspace,
        changed_files=request.changed_files,
    )
    return run_phase(host, inp)


def lenient_status(result: ValidatorResult) -> str:
    """The run's status with this one result under the most lenient policy (``any``)."""
    return classify([result], policy="any").status


def coder_policy(workspace: Path, *, network: bool) -> SandboxPolicy | None:
    """The confinement the engine sets around ``generate`` (None when no backend works here)."""
    try:
        choose_backend()
    except EnvironmentProblem:
        return None
    return SandboxPolicy(workspace=workspace, read_only=(PROTECTED_DIR,), network=network)


def confined_as_the_engine_does(policy: SandboxPolicy | None) -> AbstractContextManager[SandboxPolicy | None]:
    """Every child ``snodo.api.run_process`` starts inside this block is confined by ``policy``."""
    return confined(policy)


__all__ = [
    "SandboxPolicy",
    "ValidatorResult",
    "coder_policy",
    "confined_as_the_engine_does",
    "lenient_status",
    "parse_kit_protocol",
    "run_through_runner",
]
