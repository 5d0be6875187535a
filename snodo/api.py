"""What plugin authors import. Nothing outside this module is a stable plugin interface.

Every kind (coder, validator type, predicate) has the same shape: a registration hook
yielding typed records, and a dispatch hook snodo calls with the registered name, on the
registering plugin only. A coder plugin::

    from snodo.api import hookimpl, CoderSpec, CoderCapabilities, CoderResult, FileOperation

    @hookimpl
    def snodo_coders():
        yield CoderSpec(name="echo", description="writes the spec to echo.txt",
                        capabilities=CoderCapabilities(writes_in_place=False,
                                                       commits_own_changes=False,
                                                       deterministic=True))

    @hookimpl
    def snodo_generate(name, request):
        if name != "echo":
            return None
        return CoderResult(operations=(FileOperation(op="write", path="echo.txt",
                                                     content=request.spec),))
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pluggy
from attrs import evolve

from snodo.base.errors import (
    CoderError,
    EnvironmentProblem,
    PluginError,
    SnodoError,
    ValidatorFault,
)
from snodo.judging import Judgement as TestJudgement
from snodo.judging import judge_tests, pytest_tooling
from snodo.judging.request import command_argv
from snodo.plugin.hookspecs import PROJECT
from snodo.plugin.host import PluginHost, get_plugin_manager
from snodo.plugin.planning import PlannerImpl
from snodo.plugin.records import (
    SEVERITIES,
    ArtifactContext,
    CoderCapabilities,
    CoderRequest,
    CoderResult,
    CoderSpec,
    DroppedOperation,
    FileOperation,
    PredicateContext,
    PredicateResult,
    PredicateSpec,
    RequiredProgram,
    Severity,
    ValidationRequest,
    ValidatorSpec,
    Verdict,
)
from snodo.process.runner import ProcessResult
from snodo.process.runner import run_process as _run_process
from snodo.protocol.capabilities import ALWAYS_EXCLUSIVE, CAPABILITY_TOOLS
from snodo.protocol.loader import parse_protocol
from snodo.protocol.models import Mode, Validator
from snodo.protocol.models import Protocol as ProtocolDocument
from snodo.rules.settings import Setting, coder_config_problems, tooling_problems, with_defaults
from snodo.sandbox import SandboxPolicy, choose_backend, confined, current_policy

hookimpl = pluggy.HookimplMarker(PROJECT)


def run_process(
    argv: Sequence[str],
    *,
    cwd: Path,
    timeout: float,
    silence_timeout: float | None = None,
    env: Mapping[str, str] | None = None,
    on_line: Callable[[str], None] | None = None,
    stdin_text: str | None = None,
    max_output: int = 2_000_000,
    sandbox: SandboxPolicy | None = None,
    stop_if: Callable[[str], bool] | None = None,
    writable: Sequence[Path] = (),
    pass_env: Sequence[str] = (),
) -> ProcessResult:
    """Run a child process without a shell, in its own process group, bounded by ``timeout``.

    When snodo runs your plugin on agent-written content (a validator call, a coder's
    ``generate``) the child is confined by the policy snodo set for that call: the workspace
    writable but not ``.snodo/``, ``.git/`` or protected paths, ``$SNODO_HOME`` invisible,
    network only if declared (docs/security.md). Raises :class:`EnvironmentProblem` only when
    the child cannot start (also: no working sandbox here). ``stop_if`` ends the run (and
    kills its process group) on the first output line it returns true for. ``writable`` names
    extra existing directories the confined program may write besides the workspace and its
    private ``TMPDIR`` (e.g. a per-run state directory the plugin made for its program).
    A confined child sees only an allowlisted environment (``PATH``, locale, ``TERM``,
    ``TZ``, a private ``HOME`` and ``TMPDIR``, what the protocol's ``execution.env`` names and
    what you set yourself); ``pass_env`` names inherited variables your program needs (its
    provider's API key variable): without it, ``*_KEY``/``*_TOKEN`` and the like never pass.
    """
    return _run_process(
        argv,
        cwd=cwd,
        timeout=timeout,
        silence_timeout=silence_timeout,
        env=env,
        on_line=on_line,
        stdin_text=stdin_text,
        max_output=max_output,
        sandbox=_with_writable(sandbox if sandbox is not None else current_policy(), writable),
        pass_env=pass_env,
        stop_if=stop_if,
    )


def _with_writable(policy: SandboxPolicy | None, writable: Sequence[Path]) -> SandboxPolicy | None:
    return policy.with_writable(writable) if policy is not None and writable else policy


if TYPE_CHECKING:
    from snodo.governance.policy import ValidatorResult

# ------------------------------------------------------------- checking a plugin
# What a tool checking a plugin against the real engine needs (the conformance kit uses
# exactly these): the shared validator runner, the outcome policy, the strict protocol
# loader and a coder's confinement. Plugins themselves never need them.


def run_validator(host: PluginHost, request: ValidationRequest) -> ValidatorResult:
    """What the shared runner reports for ``request``, as the engine gets it: the validator
    asked through ``snodo_validate`` under its ``tooling.timeout`` (abandoned when it
    overruns), its verdict capped by ``severity_cap``, ``None`` or a crash turned into an
    ``error`` result."""
    # imported here, not at the top: `snodo serve` imports this module (through the plugins)
    # before it answers `initialize`, and the governance stack is not needed for that
    from snodo.governance.runner import PhaseInput, run_phase

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
    from snodo.governance.policy import classify  # not at start-up (see run_validator)

    return classify(results, policy=policy).status


#: Names kept for one release after they left the API, with what replaces them.
_DEPRECATED = {
    "run_python_tests": "judge_tests (a test run's exit status proves nothing: docs/judging.md)",
    "SuiteRun": "TestJudgement, returned by judge_tests",
}


def __getattr__(name: str) -> Any:
    """``ValidatorResult`` on first use (see :func:`run_validator` for why not at import);
    a deprecated name with a warning saying what replaces it."""
    if name == "ValidatorResult":
        from snodo.governance.policy import ValidatorResult

        return ValidatorResult
    if name in _DEPRECATED:
        import warnings

        from snodo.workspace import testrun

        warnings.warn(
            f"snodo.api.{name} is deprecated and goes in the next release: use {_DEPRECATED[name]}",
            DeprecationWarning,
            stacklevel=2,
        )
        return getattr(testrun, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def parse_protocol_document(document: Mapping[str, Any], *, source: str = "<document>") -> ProtocolDocument:
    """``document`` (a protocol as a mapping) read by the strict loader every command uses;
    raises the :class:`~snodo.base.errors.ProtocolError` a user would see."""
    return parse_protocol(json.dumps(document), source=source)


@contextmanager
def confined_as_a_coder(
    workspace: Path, *, network: bool, read_only: Sequence[str] = ()
) -> Iterator[SandboxPolicy | None]:
    """Every child :func:`run_process` starts inside this block is confined as the engine
    confines a coder's ``generate``: ``workspace`` writable but not ``read_only`` (nor
    ``.snodo/``, ``.git/``), the network only when ``network``. Yields the policy, or
    ``None`` (unconfined) when no confinement backend works on this machine."""
    try:
        choose_backend()
    except EnvironmentProblem:
        policy = None
    else:
        policy = SandboxPolicy(workspace=workspace, read_only=tuple(read_only), network=network)
    with confined(policy):
        yield policy


__all__ = [
    "ALWAYS_EXCLUSIVE",
    "CAPABILITY_TOOLS",
    "SEVERITIES",
    "ArtifactContext",
    "CoderCapabilities",
    "CoderError",
    "CoderRequest",
    "CoderResult",
    "CoderSpec",
    "DroppedOperation",
    "EnvironmentProblem",
    "FileOperation",
    "Mode",
    "PlannerImpl",
    "PluginError",
    "PluginHost",
    "PredicateContext",
    "PredicateResult",
    "PredicateSpec",
    "ProcessResult",
    "ProtocolDocument",
    "RequiredProgram",
    "Setting",
    "Severity",
    "SnodoError",
    "TestJudgement",
    "ValidationRequest",
    "Validator",
    "ValidatorFault",
    "ValidatorResult",
    "ValidatorSpec",
    "Verdict",
    "coder_config_problems",
    "command_argv",
    "confined_as_a_coder",
    "get_plugin_manager",
    "hookimpl",
    "judge_tests",
    "parse_protocol_document",
    "pytest_tooling",
    "run_process",
    "run_status",
    "run_validator",
    "tooling_problems",
    "with_defaults",
]
