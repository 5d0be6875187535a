"""The base install (``pip install snodo-governance``, no ``[model]`` extra) runs everything
that needs no model, and every model-backed built-in names the extra instead of crashing or
passing.

litellm is made unimportable the way a base install has it: a directory first on
``PYTHONPATH`` whose ``litellm`` package raises ``ModuleNotFoundError`` on import, so every
``import litellm`` of the snodo process fails exactly as on a machine without it.
``benchmarks/install_size.py`` runs the same commands in a really fresh venv of the base.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.conftest import CliResult, git, make_repo
from tests.mcp.mcp_harness import serve

pytestmark = pytest.mark.slow

EXTRA = "pip install 'snodo-governance[model]'"

JUDGED = """\
protocol_id: judged
name: judged
modes:
  - mode_id: producer
    tools: [read, validate]
    validators: [review]
    coder: mock
validators:
  - validator_id: review
    validator_type: llm
    model: openai/gpt-4o-mini
    tooling: {mock_response: '{"severity": "pass", "justification": "looks fine"}'}
"""


@pytest.fixture
def no_litellm(tmp_path: Path) -> dict[str, str]:
    """The environment of a process for which litellm is not installed."""
    blocked = tmp_path / "no-model-stack"
    (blocked / "litellm").mkdir(parents=True)
    (blocked / "litellm" / "__init__.py").write_text(
        "raise ModuleNotFoundError(\"No module named 'litellm'\", name='litellm')\n"
    )
    path = os.pathsep.join([str(blocked), *filter(None, [os.environ.get("PYTHONPATH")])])
    env = {"PYTHONPATH": path}
    probe = subprocess.run(
        [sys.executable, "-c", "import litellm"],
        env={**os.environ, **env},
        capture_output=True,
        text=True,
        check=False,
    )
    assert "No module named 'litellm'" in probe.stderr, probe.stderr  # the block holds
    return env


def test_init_check_run_validate_verify_and_serve_need_no_model_stack(
    tmp_path: Path, snodo_cli: Callable[..., CliResult], snodo_home: Path, no_litellm: dict[str, str]
) -> None:
    repo = make_repo(tmp_path / "repo")

    def snodo(*args: str) -> CliResult:
        return snodo_cli(*args, cwd=repo, env=no_litellm)

    init = snodo("init", "--template", "solo")  # its producer's coder is litellm
    assert init.returncode == 0, init
    keys = snodo("keys", "show", "--name", "dev")
    assert keys.returncode == 0, keys
    (repo / ".snodo" / "allowed_signers").write_text(keys.stdout)
    signed = snodo("protocol", "sign", "-m", "protocol and signers", "--yes")  # the bootstrap: no model needed
    assert signed.returncode == 0, signed

    checked = snodo("protocol", "check")
    assert checked.returncode == 0, checked

    run = snodo("run", "add a hello module", "--mock", "--json")
    assert run.returncode == 0, run
    payload = run.json()
    assert payload["status"] == "completed" and "hello.py" in payload["files"], payload

    (tmp_path / "task.md").write_text("add a hello module\n")
    validated = snodo("validate", f"@{tmp_path / 'task.md'}", "--json")
    assert validated.returncode == 0, validated
    assert validated.json()["status"] == "pass"

    verified = snodo("verify", f"main..{payload['branch']}", "--json")
    assert verified.returncode == 0, verified
    assert [row["how"] for row in verified.json()["commits"]] == ["attestation"]

    with serve(repo, snodo_home, "--mode", "producer", env=no_litellm) as agent:
        assert "validate_task" in agent.tool_names()
        answer = agent.ok("validate_task", {"task_id": "t-base", "task_spec": "add a goodbye module"})
        assert answer["status"] == "pass", answer


def test_the_litellm_coder_halts_naming_the_extra(
    tmp_path: Path, snodo_cli: Callable[..., CliResult], no_litellm: dict[str, str]
) -> None:
    repo = make_repo(tmp_path / "repo")
    assert snodo_cli("init", "--template", "solo", cwd=repo, env=no_litellm).returncode == 0
    git(repo, "add", ".snodo")
    git(repo, "commit", "-q", "-m", "protocol")
    run = snodo_cli("run", "add a hello module", "--json", cwd=repo, env={**no_litellm, "OPENAI_API_KEY": "sk-x"})
    assert run.returncode == 1, run
    payload = run.json()
    assert payload["outcome"] == "environment_error", payload
    assert "the model stack is not installed" in payload["message"] and EXTRA in payload["message"], payload
    assert payload["files"] == [] and payload["usage"] == []  # stopped at preflight, nothing spent
    assert "Traceback" not in run.stderr


def test_a_model_judge_is_a_validator_error_naming_the_extra(
    tmp_path: Path, snodo_cli: Callable[..., CliResult], no_litellm: dict[str, str]
) -> None:
    repo = make_repo(tmp_path / "repo")
    (repo / ".snodo").mkdir()
    (repo / ".snodo" / "protocol.yml").write_text(JUDGED)
    git(repo, "add", ".snodo")
    git(repo, "commit", "-q", "-m", "protocol")
    validated = snodo_cli("validate", "add a hello module", "--json", cwd=repo, env=no_litellm)
    assert validated.returncode == 3, validated  # validator_error: never a pass without a judge
    (result,) = json.loads(validated.stdout)["results"]
    assert result["severity"] == "error", result
    assert "cannot judge" in result["error"] and EXTRA in result["error"], result
    # the same protocol with litellm importable: the judge's canned verdict passes
    judged = snodo_cli("validate", "add a hello module", "--json", cwd=repo)
    assert judged.returncode == 0, judged
