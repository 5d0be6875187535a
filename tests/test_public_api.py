"""What plugins may import is a contract: changing it must be deliberate (docs/plugins.md)."""

from __future__ import annotations

import tomllib
from importlib.metadata import version
from pathlib import Path

import snodo
import snodo.api

API = [
    "ALWAYS_EXCLUSIVE",
    "ArtifactContext",
    "CAPABILITY_TOOLS",
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
    "SEVERITIES",
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


def test_the_plugin_api_is_exactly_this_list() -> None:
    """A name added to or removed from ``snodo.api`` fails here until this list (and the
    plugin docs and CHANGELOG) say so."""
    assert sorted(snodo.api.__all__) == API
    assert len(set(snodo.api.__all__)) == len(snodo.api.__all__)
    assert all(hasattr(snodo.api, name) for name in API)


def test_the_version_is_the_installed_one_and_matches_pyproject() -> None:
    pyproject = tomllib.loads((Path(snodo.__file__).parents[1] / "pyproject.toml").read_text())
    assert snodo.__version__ == version("snodo") == pyproject["project"]["version"]
