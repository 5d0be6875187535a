"""What plugin authors import. Nothing outside this module is a stable plugin interface.

Every kind (coder, validator type, predicate) has the same shape: a registration hook
yielding typed records, and a dispatch hook snodo calls with the registered name, on the
registering plugin only (docs/plugins.md, "Writing a coder", shows a whole plugin).
"""

from __future__ import annotations

import importlib
import warnings
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pluggy

from snodo.base.errors import CoderError, EnvironmentProblem, ValidatorFault
from snodo.judging import Judgement as TestJudgement
from snodo.judging import judge_tests
from snodo.plugin.hookspecs import PROJECT
from snodo.plugin.records import (
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
from snodo.process.runner import run_process as _run_process
from snodo.protocol.models import Mode, Validator
from snodo.rules.settings import Setting
from snodo.sandbox import SandboxPolicy, current_policy

if TYPE_CHECKING:
    from snodo.process.runner import ProcessResult

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
    """Run a child process without a shell, in its own process group, bounded by ``timeout``; on
    agent-written content confined, with an allowlisted environment (docs/plugins.md, "Running
    programs"). Raises :class:`EnvironmentProblem` only when the child cannot start."""
    policy = sandbox if sandbox is not None else current_policy()
    return _run_process(
        argv,
        cwd=cwd,
        timeout=timeout,
        silence_timeout=silence_timeout,
        env=env,
        on_line=on_line,
        stdin_text=stdin_text,
        max_output=max_output,
        sandbox=policy.with_writable(writable) if policy is not None and writable else policy,
        pass_env=pass_env,
        stop_if=stop_if,
    )


#: Names that left the API, still importable for one release with a DeprecationWarning
#: (docs/plugins.md, "Deprecation policy"): name → (where it lives now, what to use).
_MOVED: dict[str, tuple[str, str, str]] = {
    **{
        name: ("snodo.testing", name, f"snodo.testing.{name}")
        for name in (
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
        )
    },
    "ProcessResult": ("snodo.process.runner", "ProcessResult", "the attributes of what run_process returns"),
    "SEVERITIES": ("snodo.plugin.records", "SEVERITIES", "typing.get_args(Severity)"),
    "ALWAYS_EXCLUSIVE": ("snodo.protocol.capabilities", "ALWAYS_EXCLUSIVE", "Mode.ALWAYS_EXCLUSIVE"),
    "CAPABILITY_TOOLS": ("snodo.protocol.capabilities", "CAPABILITY_TOOLS", "Mode.CAPABILITY_TOOLS"),
    "with_defaults": ("snodo.rules.settings", "with_defaults", "Setting.with_defaults"),
    "tooling_problems": ("snodo.rules.settings", "tooling_problems", "Setting.tooling_problems"),
    "coder_config_problems": ("snodo.rules.settings", "coder_config_problems", "Setting.coder_config_problems"),
    "command_argv": ("snodo.judging.tooling", "command_argv", "TestJudgement.command_argv"),
    "pytest_tooling": ("snodo.judging.tooling", "pytest_tooling", "TestJudgement.pytest_tooling"),
    "run_python_tests": (
        "snodo.judging.testrun",
        "run_python_tests",
        "judge_tests (a test run's exit status proves nothing: docs/judging.md)",
    ),
    "SuiteRun": ("snodo.judging.testrun", "TestRunResult", "TestJudgement, returned by judge_tests"),
}


def __getattr__(name: str) -> Any:
    """A name that left the API, with a warning saying what replaces it."""
    if name not in _MOVED:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    module, attribute, instead = _MOVED[name]
    warnings.warn(
        f"snodo.api.{name} is deprecated and goes in the next release: use {instead}",
        DeprecationWarning,
        stacklevel=2,
    )
    return getattr(importlib.import_module(module), attribute)


__all__ = [
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
    "PredicateContext",
    "PredicateResult",
    "PredicateSpec",
    "RequiredProgram",
    "Setting",
    "Severity",
    "TestJudgement",
    "ValidationRequest",
    "Validator",
    "ValidatorFault",
    "ValidatorSpec",
    "Verdict",
    "hookimpl",
    "judge_tests",
    "run_process",
]
