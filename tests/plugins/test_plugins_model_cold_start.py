"""A model's timeout bounds the provider, not snodo's start-up; no path that needs no model
pays for the model stack.

litellm's import takes seconds on a loaded machine. Counted inside a coder's deadline, a
short ``timeout`` with a hanging provider halted the run before any request was sent. Here a
cold ``snodo run`` (a new process: litellm not imported yet) against a provider that accepts
the request and never answers must send it, then wait the whole ``timeout`` for it.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path

import pytest
from model_server import ModelServer

from tests.conftest import CliResult, git, make_repo
from tests.mcp.mcp_harness import serve

pytestmark = pytest.mark.slow

TIMEOUT = 5.0
KEY = "SNODO_TEST_MODEL_KEY"

PROTOCOL = """\
protocol_id: cold
name: cold
modes:
  - mode_id: producer
    tools: [read, validate, dispatch]
    validators: [pre, post]
    coder: litellm
    coder_config: {{model: hosted_vllm/cold, api_base: "{base}", api_key_env: {key}, timeout: {timeout}, max_retries: 2}}
validators:
  - {{validator_id: pre, validator_type: command, tooling: {{command: "true"}}}}
  - {{validator_id: post, validator_type: command, evaluation_phase: post_execute, tooling: {{command: "true"}}}}
"""


def test_a_cold_run_sends_its_request_and_waits_the_whole_timeout_for_it(
    tmp_path: Path, snodo_cli: Callable[..., CliResult]
) -> None:
    repo = make_repo(tmp_path / "repo")
    with ModelServer([{"hang": 60}]) as server:
        (repo / ".snodo").mkdir()
        (repo / ".snodo" / "protocol.yml").write_text(PROTOCOL.format(base=server.base_url, key=KEY, timeout=TIMEOUT))
        git(repo, "add", ".snodo")
        git(repo, "commit", "-q", "-m", "protocol")
        run = snodo_cli("run", "add a hello module", "--json", cwd=repo, env={KEY: "sk-test"}, timeout=300)
        ended = time.monotonic()
        assert len(server.requests) == 1, run  # sent, and a timeout is never retried
        arrived = server.requests[0]["at"]
        server.hung.set()
    assert run.returncode == 1, run
    payload = run.json()
    assert payload["outcome"] == "environment_error", payload
    assert "did not answer within" in payload["message"], payload
    waited = ended - arrived
    # The lower bound is the point: a deadline that had counted litellm's import (seconds)
    # would have left the request only what the import did not use. The upper one is far
    # below the 60 s hang, with room for the halted run's bookkeeping and the process's exit on
    # a shared machine (benchmarks/model_timeout.py measures the call itself to 0.5 s).
    assert TIMEOUT - 1.5 <= waited <= TIMEOUT + 10, f"the run ended {waited:.2f}s after its request arrived"


def test_serving_and_validating_with_models_configured_imports_no_model_stack(
    tmp_path: Path, snodo_cli: Callable[..., CliResult], snodo_home: Path
) -> None:
    """The solo template names a litellm coder and a model for the planner; its validators need
    no model. From ``serve``'s start to its first ``validate_task`` answer, neither litellm
    nor the openai SDK is imported (``-X importtime`` lists every module the server loaded)."""
    repo = make_repo(tmp_path / "repo")
    assert snodo_cli("init", "--template", "solo", cwd=repo).returncode == 0
    git(repo, "add", ".snodo")
    git(repo, "commit", "-q", "-m", "protocol")
    errlog = tmp_path / "serve.stderr"
    with serve(repo, snodo_home, "--mode", "producer", stderr=errlog, env={"PYTHONPROFILEIMPORTTIME": "1"}) as agent:
        answer = agent.ok("validate_task", {"task_id": "t-cold", "task_spec": "add a hello module"})
        assert answer["status"] == "pass", answer
    loaded = {line.rsplit("|", 1)[1].strip() for line in errlog.read_text().splitlines() if "import time:" in line}
    assert "snodo.governance.runner" in loaded  # the profile did record the validation's imports
    heavy = sorted(m for m in loaded if m.split(".")[0] in ("litellm", "openai", "tiktoken", "tokenizers"))
    assert heavy == []


JUDGED = """\
protocol_id: cold-judge
name: cold-judge
modes:
  - mode_id: producer
    tools: [read, validate, dispatch]
    validators: [review, post]
    coder: mock
validators:
  - validator_id: review
    validator_type: llm
    model: hosted_vllm/cold
    tooling: {{api_base: "{base}", api_key_env: {key}, timeout: {timeout}, max_retries: 0}}
  - {{validator_id: post, validator_type: command, evaluation_phase: post_execute, tooling: {{command: "true"}}}}
"""


def test_a_cold_runs_judge_sends_its_request_within_its_timeout(
    tmp_path: Path, snodo_cli: Callable[..., CliResult]
) -> None:
    """The runner bounds a judge by its ``timeout`` too: a run's preflight makes litellm ready,
    so the first judge of a new process spends that time on the model."""
    repo = make_repo(tmp_path / "repo")
    with ModelServer([{"hang": 60}]) as server:
        (repo / ".snodo").mkdir()
        (repo / ".snodo" / "protocol.yml").write_text(JUDGED.format(base=server.base_url, key=KEY, timeout=TIMEOUT))
        git(repo, "add", ".snodo")
        git(repo, "commit", "-q", "-m", "protocol")
        # the judge's model call is abandoned at its deadline, still waiting on the hung server:
        # the process must exit all the same (tests/test_cli_foundation.py shows why it could not)
        run = snodo_cli("run", "add a hello module", "--mock", "--json", cwd=repo, env={KEY: "sk-test"}, timeout=120)
        ended = time.monotonic()
        assert len(server.requests) == 1, run  # the judge's request was sent
        arrived = server.requests[0]["at"]
        server.hung.set()
    waited = ended - arrived
    # as for the coder: an import inside the runner's bound would have left the request only the rest
    assert waited >= TIMEOUT - 1.5, f"the run ended {waited:.2f}s after the judge's request arrived"
    payload = run.json()
    assert payload["outcome"] == "validator_error", payload  # a judge that timed out never passes
    (review,) = [v for v in payload["validators"] if v["validator_id"] == "review"]
    assert review["severity"] == "error", review
