"""What plugin authors import. Nothing outside this module is a stable plugin interface.

A coder plugin::

    from snodo.api import hookimpl, CoderSpec, CoderCapabilities, CoderResult, FileOperation

    class EchoCoder:
        def __init__(self, config): self.config = config
        def generate(self, request):
            return CoderResult(operations=(FileOperation(op="write", path="echo.txt",
                                                         content=request.spec),))

    @hookimpl
    def snodo_coders():
        yield CoderSpec(name="echo", description="writes the spec to echo.txt",
                        capabilities=CoderCapabilities(writes_in_place=False,
                                                       commits_own_changes=False,
                                                       deterministic=True),
                        factory=EchoCoder)
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from pathlib import Path

import pluggy

from snodo.errors import (
    CoderError,
    EnvironmentProblem,
    PluginError,
    SnodoError,
    ValidatorFault,
)
from snodo.hookspecs import PROJECT
from snodo.planning import PlannerImpl
from snodo.plugins import PluginHost, get_plugin_manager
from snodo.proc import ProcessResult
from snodo.proc import run_process as _run_process
from snodo.protocol.capabilities import ALWAYS_EXCLUSIVE, CAPABILITY_TOOLS
from snodo.protocol.models import Mode, Validator
from snodo.protocol.models import Protocol as ProtocolDocument
from snodo.records import (
    SEVERITIES,
    ArtifactContext,
    Coder,
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
from snodo.sandbox import SandboxPolicy, current_policy
from snodo.settings import Setting, coder_config_problems, tooling_problems, with_defaults
from snodo.workspace.testrun import SuiteRun, TestOutput, read_test_output, run_python_tests

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


__all__ = [
    "ALWAYS_EXCLUSIVE",
    "CAPABILITY_TOOLS",
    "SEVERITIES",
    "ArtifactContext",
    "Coder",
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
    "SuiteRun",
    "TestOutput",
    "ValidationRequest",
    "Validator",
    "ValidatorFault",
    "ValidatorSpec",
    "Verdict",
    "coder_config_problems",
    "get_plugin_manager",
    "hookimpl",
    "read_test_output",
    "run_process",
    "run_python_tests",
    "tooling_problems",
    "with_defaults",
]
