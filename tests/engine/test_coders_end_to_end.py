"""The shipped coders through the whole engine: litellm (offline mock_response, and a real
keyless call) and opencode (a fake executable on PATH)."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import pytest
from attrs import evolve

from snodo.engine.loop import Engine
from snodo.governance.service import Project
from snodo.plugin.host import get_plugin_manager
from snodo.protocol import load_protocol

MODEL = "openai/gpt-4o-mini"
REPLY = json.dumps(
    {
        "files": [
            {"op": "write", "path": "greet.py", "content": "def greet():\n    return 'hello'\n"},
            {
                "op": "write",
                "path": "tests/test_greet.py",
                "content": "import greet\n\n\ndef test_greet():\n    assert greet.greet() == 'hello'\n",
            },
        ]
    }
)


def write_protocol(repo: Path, coder: str, coder_config: dict) -> None:  # type: ignore[type-arg]
    (repo / ".snodo").mkdir(exist_ok=True)
    (repo / ".snodo" / "protocol.yml").write_text(f"""\
protocol_id: t
name: t
modes:
  - mode_id: producer
    tools: [read, edit, validate, dispatch]
    validators: [scope, tests]
    coder: {coder}
    coder_config: {json.dumps(coder_config)}
validators:
  - {{validator_id: scope, validator_type: protocol}}
  - {{validator_id: tests, validator_type: pytest, evaluation_phase: post_execute}}
""")


def test_litellm_coder_completes_a_run_through_mock_response(git_repo: Path, snodo_cli) -> None:  # type: ignore[no-untyped-def]
    write_protocol(git_repo, "litellm", {"model": MODEL, "mock_response": REPLY})
    r = snodo_cli("run", "add a greet module", "--json", cwd=git_repo)
    assert r.returncode == 0, r
    payload = r.json()
    assert sorted(payload["files"]) == ["greet.py", "tests/test_greet.py"]
    assert next(v for v in payload["validators"] if v["validator_id"] == "tests")["severity"] == "pass"
    (spent,) = payload["usage"]  # what the coder reported, in the payload and in the audit log
    assert spent["attempt"] == 0 and spent["model"] == MODEL and spent["requests"] == 1
    assert spent["prompt_tokens"] > 0 and spent["completion_tokens"] > 0
    records = [json.loads(x) for x in (git_repo / ".snodo" / "audit.log").read_text().splitlines()]
    (audited,) = [r["data"] for r in records if r["event"] == "coder_usage"]
    assert audited["coder"] == "litellm" and audited["prompt_tokens"] == spent["prompt_tokens"]


def test_litellm_without_credentials_is_an_environment_error(git_repo: Path, snodo_cli) -> None:  # type: ignore[no-untyped-def]
    write_protocol(git_repo, "litellm", {"model": MODEL})
    env = {k: v for k, v in os.environ.items() if not k.endswith("_API_KEY")}
    r = snodo_cli("run", "add a greet module", "--json", cwd=git_repo, env={**env, "OPENAI_API_KEY": ""})
    assert r.returncode == 1, r
    payload = r.json()
    assert payload["outcome"] == "environment_error"
    assert MODEL in payload["message"] and "OPENAI_API_KEY is not set" in payload["message"]
    events = [json.loads(x)["event"] for x in (git_repo / ".snodo" / "audit.log").read_text().splitlines()]
    assert "token_issued" not in events and "token_consumed" not in events  # checked before any token


def test_mocked_authentication_error_halts_naming_the_model(git_repo: Path) -> None:
    import litellm

    write_protocol(git_repo, "litellm", {"model": MODEL})
    host = get_plugin_manager()
    loaded = load_protocol(git_repo / ".snodo" / "protocol.yml", host)
    mode = evolve(
        loaded.protocol.modes[0],
        coder_config={
            "model": MODEL,
            "mock_response": litellm.AuthenticationError(message="invalid api key", llm_provider="openai", model=MODEL),
        },
    )
    loaded = evolve(loaded, protocol=evolve(loaded.protocol, modes=(mode,)))
    result = Engine(Project(loaded, host)).run("add a greet module")
    assert (result.outcome, result.phase) == ("environment_error", "execute")
    assert MODEL in result.message


FAKE = """#!{python}
import os, subprocess, sys, time
from pathlib import Path
mode = os.environ.get("OPENCODE_FAKE", "good")
if mode == "good":
    Path("greet.py").write_text("def greet():\\n    return 'hello'\\n")
    Path("tests").mkdir(exist_ok=True)
    Path("tests/test_greet.py").write_text("import greet\\n\\ndef test_greet():\\n    assert greet.greet()\\n")
    print("done", flush=True)
elif mode == "hang":
    subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    while True:
        print("thinking", flush=True)
        time.sleep(0.2)
elif mode == "crash":
    print("fatal: model refused", flush=True)
    sys.exit(3)
elif mode == "snodo":
    Path(".snodo").mkdir(exist_ok=True)
    Path(".snodo/protocol.yml").write_text("protocol_id: hijacked\\n")
"""


@pytest.fixture
def opencode_path(tmp_path: Path) -> str:
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    exe = bin_dir / "opencode"
    exe.write_text(FAKE.format(python=sys.executable))
    exe.chmod(0o755)
    return f"{bin_dir}:{os.environ['PATH']}"


@pytest.mark.parametrize(
    ("behaviour", "status", "outcome", "says"),
    [
        ("good", "completed", None, "tests"),
        ("hang", "halted", "environment_error", "timed out"),
        ("crash", "halted", "environment_error", "model refused"),
        ("snodo", "halted", "blocker", ".snodo/protocol.yml"),
    ],
)
def test_opencode_coder_through_the_engine(
    git_repo: Path,
    snodo_cli,
    opencode_path: str,
    behaviour: str,  # type: ignore[no-untyped-def]
    status: str,
    outcome: str | None,
    says: str,
) -> None:
    write_protocol(git_repo, "opencode", {"timeout": 3})
    protocol_before = (git_repo / ".snodo" / "protocol.yml").read_text()
    r = snodo_cli(
        "run", "add a greet module", "--json", cwd=git_repo, env={"PATH": opencode_path, "OPENCODE_FAKE": behaviour}
    )
    payload = r.json()
    assert (payload["status"], payload["outcome"]) == (status, outcome), payload
    assert says in json.dumps(payload)
    assert (git_repo / ".snodo" / "protocol.yml").read_text() == protocol_before
    if behaviour == "good":
        assert sorted(payload["files"]) == ["greet.py", "tests/test_greet.py"]


def test_opencode_missing_is_an_environment_error_before_any_token(git_repo: Path, snodo_cli) -> None:  # type: ignore[no-untyped-def]
    write_protocol(git_repo, "opencode", {})
    r = snodo_cli("run", "add a greet module", "--json", cwd=git_repo, env={"PATH": "/usr/bin:/bin"})
    payload = r.json()
    assert payload["outcome"] == "environment_error" and "npm install -g opencode-ai" in payload["message"]
    events = [json.loads(x)["event"] for x in (git_repo / ".snodo" / "audit.log").read_text().splitlines()]
    events = [e for e in events if e != "checkpoint"]
    assert "token_issued" not in events
