"""What plugins may import is a contract: changing it must be deliberate (docs/plugins.md)."""

from __future__ import annotations

import inspect
import re
import tomllib
from importlib.metadata import version
from pathlib import Path

import pytest

import snodo
import snodo.api

API = [
    "ALWAYS_EXCLUSIVE",
    "ArtifactContext",
    "CAPABILITY_TOOLS",
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


def test_the_plugin_api_is_exactly_this_list() -> None:
    """A name added to or removed from ``snodo.api`` fails here until this list (and the
    plugin docs and CHANGELOG) say so."""
    assert sorted(snodo.api.__all__) == API
    assert len(set(snodo.api.__all__)) == len(snodo.api.__all__)
    assert all(hasattr(snodo.api, name) for name in API)


def test_every_public_name_is_used_by_a_plugin_the_kit_or_an_example_and_documented() -> None:
    """``snodo.api`` holds what plugin authors and the conformance kit use, nothing more: each
    name is imported by the built-in plugins, the kit or an example, or is part of a hook's or
    a public function's signature (what an author annotates with); docs/plugins.md names it."""
    root = Path(snodo.__file__).parents[1]
    sources = [p for top in ("plugins", "conformance", "examples") for p in (root / top).rglob("*.py")]
    signatures = [
        str(annotation)
        for name in API
        if inspect.isfunction(fn := getattr(snodo.api, name))
        for annotation in fn.__annotations__.values()
    ]
    users = "\n".join([*(p.read_text() for p in sources), (root / "snodo" / "plugin" / "hookspecs.py").read_text(), *signatures])
    docs = (root / "docs" / "plugins.md").read_text()
    unused = [name for name in API if not re.search(rf"\b{name}\b", users)]
    undocumented = [name for name in API if not re.search(rf"\b{name}\b", docs)]
    assert (unused, undocumented) == ([], [])


def test_the_version_is_the_installed_one_and_matches_pyproject() -> None:
    pyproject = tomllib.loads((Path(snodo.__file__).parents[1] / "pyproject.toml").read_text())
    assert snodo.__version__ == version(snodo.DISTRIBUTION) == pyproject["project"]["version"]


def test_a_name_leaving_the_api_warns_for_a_release_first() -> None:
    """The deprecation policy (docs/plugins.md): a removed name still works for one release,
    with a DeprecationWarning naming what replaces it; it is no part of ``__all__``."""
    for name, replacement in (("run_python_tests", "judge_tests"), ("SuiteRun", "TestJudgement")):
        with pytest.warns(DeprecationWarning, match=replacement):
            assert callable(getattr(snodo.api, name)) or isinstance(getattr(snodo.api, name), type)
        assert name not in snodo.api.__all__
