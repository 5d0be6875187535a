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
                                                       observes_tests=False,
                                                       deterministic=True),
                        factory=EchoCoder)
"""

from __future__ import annotations

import pluggy

from snodo.errors import (
    CoderError,
    EnvironmentProblem,
    PathValidationError,
    SnodoError,
    ValidatorFault,
)
from snodo.hookspecs import PROJECT
from snodo.proc import ProcessResult, run_process
from snodo.protocol.capabilities import ALWAYS_EXCLUSIVE, CAPABILITY_TOOLS
from snodo.protocol.models import Constraint, Mode, Validator
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
from snodo.workspace.testrun import SuiteRun, TestOutput, read_test_output, run_python_tests

hookimpl = pluggy.HookimplMarker(PROJECT)

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
    "Constraint",
    "DroppedOperation",
    "EnvironmentProblem",
    "FileOperation",
    "Mode",
    "PathValidationError",
    "PredicateContext",
    "PredicateResult",
    "PredicateSpec",
    "ProcessResult",
    "ProtocolDocument",
    "RequiredProgram",
    "Severity",
    "SnodoError",
    "SuiteRun",
    "TestOutput",
    "ValidationRequest",
    "Validator",
    "ValidatorFault",
    "ValidatorSpec",
    "Verdict",
    "hookimpl",
    "read_test_output",
    "run_process",
    "run_python_tests",
]
