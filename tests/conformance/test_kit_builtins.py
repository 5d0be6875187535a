"""The conformance kit against every built-in plugin, as an author would run it: by name,
resolved through snodo's own entry points. Model-backed plugins stay offline through
litellm's ``mock_response`` (tests/conformance/configs/); opencode runs against a fake CLI.

A built-in that broke a contract would show here as a failure: these tests never list a
known failure (``--snodo-xfail``) to make one pass.
"""

from __future__ import annotations

import shutil
from collections.abc import Callable
from pathlib import Path

import pytest
from fake_opencode import install as install_fake_opencode

CONFIGS = Path(__file__).resolve().parent / "configs"

Kit = Callable[..., pytest.RunResult]

CODER_TESTS = 14
VALIDATOR_TESTS = 11


def test_mock_coder(kit: Kit) -> None:
    result = kit("--snodo-coder", "mock")
    result.assert_outcomes(passed=10, skipped=4)
    result.stdout.fnmatch_lines(
        [
            "*coder 'mock': skipped, the coder does not declare writes_in_place*",
            "*coder 'mock': skipped, the coder does not declare required_programs*",
        ]
    )


def test_mock_coder_proposing_governance_writes_passes_because_the_engine_drops_them(kit: Kit) -> None:
    config = (
        '{"files": {"hello.py": "x = 1\\n", ".snodo/protocol.yml": "hijacked: true\\n", '
        '"../escape.txt": "out\\n", ".git/config": "[core]\\n"}}'
    )
    result = kit(
        "--snodo-coder",
        "mock",
        "--snodo-coder-config",
        config,
        "-rsP",
        "-k",
        "test_engine_filter_drops_governance_operations",
    )
    result.assert_outcomes(passed=1, deselected=CODER_TESTS - 1)
    result.stdout.fnmatch_lines(
        [
            "*simple task: proposed 4 operation(s); the engine's filter dropped *.snodo/protocol.yml*",
        ]
    )
    assert "../escape.txt (the path escapes the project root)" in result.stdout.str()


def test_litellm_coder_offline(kit: Kit) -> None:
    result = kit("--snodo-coder", "litellm", f"--snodo-coder-config={CONFIGS / 'litellm.json'}", "-rsP")
    result.assert_outcomes(passed=8, skipped=6)
    result.stdout.fnmatch_lines(
        [
            "*the engine's filter dropped .snodo/protocol.yml*",
            "*coder 'litellm': skipped, the coder declares needs_network*",
            "*coder 'litellm': skipped, the coder does not declare deterministic*",
        ]
    )


def test_litellm_coder_without_a_model_says_how_to_configure_it(kit: Kit) -> None:
    result = kit("--snodo-coder", "litellm", "-k", "well_formed")
    result.assert_outcomes(errors=1, deselected=CODER_TESTS - 1)
    result.stdout.fnmatch_lines(
        [
            "*coder 'litellm': its preflight refused the kit's coder_config {}*no model to call*",
            "*Give it the settings it needs with --snodo-coder-config=JSON|FILE*",
        ]
    )


def test_opencode_coder_with_a_fake_cli(kit: Kit, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    bin_dir = tmp_path / "bin"
    install_fake_opencode(bin_dir)
    monkeypatch.setenv("PATH", f"{bin_dir}{':'}{Path('/usr/bin')}:/bin")
    monkeypatch.setenv("OPENCODE_FAKE_DELAY", "0")
    result = kit("--snodo-coder", "opencode")
    result.assert_outcomes(passed=10, skipped=4)
    result.stdout.fnmatch_lines(["*coder 'opencode': skipped, the coder declares writes_in_place*"])


def test_opencode_slower_than_its_timeout_is_stopped_in_time(
    kit: Kit, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    bin_dir = tmp_path / "bin"
    install_fake_opencode(bin_dir)
    monkeypatch.setenv("PATH", f"{bin_dir}:/usr/bin:/bin")
    monkeypatch.setenv("OPENCODE_FAKE_DELAY", "30")
    kit("--snodo-coder", "opencode", "-k", "test_honours_timeout").assert_outcomes(passed=1, deselected=CODER_TESTS - 1)


def test_opencode_without_its_program_reports_which_is_missing(
    kit: Kit, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    bin_dir = tmp_path / "git-only"
    bin_dir.mkdir()
    (bin_dir / "git").symlink_to(shutil.which("git") or "/usr/bin/git")  # the kit builds git repos
    monkeypatch.setenv("PATH", str(bin_dir))
    result = kit("--snodo-coder", "opencode", "-k", "program")
    result.assert_outcomes(passed=1, skipped=1, deselected=CODER_TESTS - 2)
    result.stdout.fnmatch_lines(["*coder 'opencode': skipped, its declared program 'opencode' is not installed here*"])


@pytest.mark.slow
def test_pytest_validator(kit: Kit) -> None:
    result = kit("--snodo-validator", "pytest")
    result.assert_outcomes(passed=10, skipped=1)
    result.stdout.fnmatch_lines(["*validator 'pytest': skipped, the validator does not declare needs_model*"])


@pytest.mark.slow
def test_acceptance_validator(kit: Kit) -> None:
    result = kit("--snodo-validator", "acceptance")
    result.assert_outcomes(passed=9, skipped=2)
    result.stdout.fnmatch_lines(["*validator 'acceptance': skipped, the validator does not declare deterministic*"])


def test_protocol_validator(kit: Kit) -> None:
    kit("--snodo-validator", "protocol").assert_outcomes(passed=9, skipped=2)


def test_llm_validator_offline(kit: Kit) -> None:
    result = kit("--snodo-validator", "llm", f"--snodo-validator-config={CONFIGS / 'llm.json'}")
    result.assert_outcomes(passed=9, skipped=2)
    result.stdout.fnmatch_lines(["*validator 'llm': skipped, the validator does not declare deterministic*"])


def test_llm_validator_with_a_model_judged_acceptance(kit: Kit) -> None:
    """The acceptance validator with a model (offline) still meets every contract."""
    result = kit(
        "--snodo-validator",
        "acceptance",
        f"--snodo-validator-config={CONFIGS / 'llm.json'}",
        "-k",
        "verdict or crash or without_model",
    )
    result.assert_outcomes(passed=3, skipped=1, deselected=VALIDATOR_TESTS - 4)
