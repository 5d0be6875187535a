"""What plugins may import is a contract: changing it must be deliberate (docs/plugins.md)."""

from __future__ import annotations

import inspect
import re
import tomllib
from importlib.metadata import version
from pathlib import Path
from typing import get_args

import pytest

import snodo
import snodo.api
import snodo.testing

API = [
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

#: what a tool checking plugins (the conformance kit, a plugin's own tests) imports besides
TESTING = [
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


def test_the_plugin_api_is_exactly_this_list() -> None:
    """A name added to or removed from ``snodo.api`` fails here until this list (and the
    plugin docs and CHANGELOG) say so."""
    assert sorted(snodo.api.__all__) == API
    assert len(set(snodo.api.__all__)) == len(snodo.api.__all__) <= 25
    assert all(hasattr(snodo.api, name) for name in API)
    assert sorted(snodo.testing.__all__) == TESTING
    assert all(hasattr(snodo.testing, name) for name in TESTING)


def test_what_left_the_api_still_works_for_a_release_and_says_where_it_went() -> None:
    """Every name the API had before it shrank to plugin authors' needs still resolves, to the
    very object it now lives as, with a DeprecationWarning naming that place."""
    moved = {
        **{name: (getattr(snodo.testing, name), f"snodo.testing.{name}") for name in TESTING},
        "with_defaults": (snodo.api.Setting.with_defaults, "Setting.with_defaults"),
        "tooling_problems": (snodo.api.Setting.tooling_problems, "Setting.tooling_problems"),
        "coder_config_problems": (snodo.api.Setting.coder_config_problems, "Setting.coder_config_problems"),
        "command_argv": (snodo.api.TestJudgement.command_argv, "TestJudgement.command_argv"),
        "pytest_tooling": (snodo.api.TestJudgement.pytest_tooling, "TestJudgement.pytest_tooling"),
        "ALWAYS_EXCLUSIVE": (snodo.api.Mode.ALWAYS_EXCLUSIVE, "Mode.ALWAYS_EXCLUSIVE"),
        "CAPABILITY_TOOLS": (snodo.api.Mode.CAPABILITY_TOOLS, "Mode.CAPABILITY_TOOLS"),
        "SEVERITIES": (get_args(snodo.api.Severity), "get_args"),
    }
    for name, (now, where) in moved.items():
        with pytest.warns(DeprecationWarning, match=re.escape(where)):
            old = getattr(snodo.api, name)
        assert name not in snodo.api.__all__
        if name in ("with_defaults", "tooling_problems", "coder_config_problems", "command_argv", "pytest_tooling"):
            assert old.__name__ == name  # the function the static method calls
        elif name == "SEVERITIES":
            assert tuple(old) == now
        else:
            assert old is now, name
    with pytest.warns(DeprecationWarning, match="run_process"):
        assert snodo.api.ProcessResult is snodo.api.run_process.__globals__["_run_process"].__globals__["ProcessResult"]


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
    users = "\n".join(
        [*(p.read_text() for p in sources), (root / "snodo" / "plugin" / "hookspecs.py").read_text(), *signatures]
    )
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


def test_the_deprecated_test_runner_still_runs_pytest_and_reads_as_before(tmp_path: Path) -> None:
    """A 0.2.0 plugin calling ``run_python_tests`` keeps working for this release: a real
    pytest run, its exit code, failed tests and the tail of its output."""
    (tmp_path / "test_it.py").write_text("def test_ok():\n    pass\n\ndef test_bad():\n    assert 1 == 2\n")
    with pytest.warns(DeprecationWarning):
        run_python_tests = snodo.api.run_python_tests
    run = run_python_tests(tmp_path, ["python", "-m", "pytest", "-q"], timeout=120)
    assert run.exit_code == 1 and not run.passed and not run.timed_out
    assert [t.rsplit("::", 1)[-1] for t in run.failed_tests] == ["test_bad"]
    assert run.output == run.output_tail and run.tail(1) == run.output_tail.splitlines()[-1]
