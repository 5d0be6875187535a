"""Refusals are evidence (issue 21, item 10), under each sandbox backend: a write the sandbox
refused, as the confined program reported it, is one ``sandbox_refusal`` audit event per path
and is named in the result a person or an agent reads — the run's table, its ``--json``
payload and ``jobs show`` on the engine path; the tool reply of ``run_tests`` over MCP.

The coder is a stand-in for the opencode CLI on PATH: it really tries the writes (confined
by snodo like the real one) and reports each failure as opencode does, in a ``tool_use``
event whose error is Node's wording (``EROFS: read-only file system, open '…'``).
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import pytest

from tests.conftest import git, make_repo, write_producer_protocol

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "mcp"))
from mcp_harness import audit, make_project, serve

pytestmark = pytest.mark.slow

FAKE_OPENCODE = r"""#!PYTHON
import errno, json, subprocess, sys
from pathlib import Path

args = sys.argv[1:]
work = Path(args[args.index("--dir") + 1])

def emit(kind, **fields):
    print(json.dumps({"type": kind, "sessionID": "ses_fake", **fields}), flush=True)

def write(path, content):
    state = {"status": "completed", "input": {"filePath": str(path)}, "title": path.name}
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(content)
    except OSError as exc:  # reported the way opencode's Node runtime words it
        code = errno.errorcode.get(exc.errno, "EIO")
        state = {"status": "error", "input": {"filePath": str(path)},
                 "error": f"{code}: {(exc.strerror or '').lower()}, open '{path}'"}
    emit("tool_use", part={"type": "tool", "tool": "write", "state": state})

emit("step_start", part={"type": "step-start"})
write(work / ".snodo" / "protocol.yml", "protocol_id: hijacked\n")
write(Path("/etc/snodo-escape"), "outside the workspace\n")
write(Path("/etc/snodo-\x1b[31mred"), "a path that would colour a terminal\n")
# Into a directory that exists: Landlock allows no new top-level file (docs/security.md).
write(work / "tests" / "test_greet.py", "def test_greet():\n    assert 'hello'.upper() == 'HELLO'\n")
emit("step_finish", part={"type": "step-finish", "reason": "stop", "tokens": {"input": 5, "output": 5}})
emit("text", part={"type": "text", "text": "added greet.py"})
"""

OPENCODE_PROTOCOL = """\
protocol_id: t
name: t
modes:
  - mode_id: producer
    tools: [read, edit, validate, dispatch]
    validators: [scope, tests]
    coder: opencode
    coder_config: {timeout: 60}
validators:
  - {validator_id: scope, validator_type: protocol}
  - {validator_id: tests, validator_type: pytest, evaluation_phase: post_execute}
"""

#: Test code (the coder's, run by the post_execute validator) that writes governance state.
WRITES_GOVERNANCE = '{files: {"tests/test_w.py": "def test_w():\\n    open(\\".snodo/protocol.yml\\", \\"w\\")\\n"}}'


def _events(repo: Path, event: str) -> list[dict]:  # type: ignore[type-arg]
    lines = (repo / ".git" / "snodo" / "audit.log").read_text().splitlines()
    return [e["data"] for e in map(json.loads, lines) if e["event"] == event]


def _committed(repo: Path) -> bytes:
    git(repo, "add", ".snodo/protocol.yml")
    git(repo, "commit", "-q", "-m", "protocol")
    return (repo / ".snodo" / "protocol.yml").read_bytes()


def test_a_coders_reported_refusals_are_audited_and_shown(backend: str, tmp_path: Path, snodo_cli) -> None:  # type: ignore[no-untyped-def]
    repo = make_repo(tmp_path / "repo")
    (repo / ".snodo").mkdir()
    (repo / ".snodo" / "protocol.yml").write_text(OPENCODE_PROTOCOL)
    (repo / "tests").mkdir()
    (repo / "tests" / "conftest.py").write_text("")
    git(repo, "add", "tests/conftest.py")
    before = _committed(repo)
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "opencode").write_text(FAKE_OPENCODE.replace("PYTHON", sys.executable))
    (bin_dir / "opencode").chmod(0o755)
    env = {"PATH": f"{bin_dir}:{os.environ['PATH']}"}
    r = snodo_cli("run", "add a greet module", "--json", cwd=repo, env=env)
    assert r.returncode == 0, r  # the refused writes did not land: the honest work completes
    payload = r.json()
    paths = [x["path"] for x in payload["sandbox_refusals"]]
    assert any(p.endswith("/.snodo/protocol.yml") for p in paths), payload["sandbox_refusals"]
    assert "/etc/snodo-escape" in paths, payload["sandbox_refusals"]
    assert {x["reported_by"] for x in payload["sandbox_refusals"]} == {"coder"}
    expected = "read-only file system" if backend == "bwrap" else "permission denied"
    assert {x["error"] for x in payload["sandbox_refusals"]} <= {expected, "read-only file system"}
    recorded = _events(repo, "sandbox_refusal")
    assert sorted(e["path"] for e in recorded) == sorted(paths)  # one event per path
    assert all(e["job_id"] == payload["job_id"] and e["task_id"] == payload["task_id"] for e in recorded)
    assert (repo / ".snodo" / "protocol.yml").read_bytes() == before
    assert "/etc/snodo-\x1b[31mred" in paths  # kept as reported (bounded) in the record...
    shown = snodo_cli("jobs", "show", payload["job_id"], cwd=repo).stdout
    assert shown.count("sandbox   refused ") == len(paths) and "protocol.yml" in shown
    assert "/etc/snodo-\\x1b[31mred" in shown and "\x1b" not in shown  # ...and escaped when shown
    assert snodo_cli("audit", "verify", cwd=repo).returncode == 0


def test_the_validators_test_output_names_refused_governance_writes(backend: str, git_repo: Path, snodo_cli) -> None:  # type: ignore[no-untyped-def]
    write_producer_protocol(git_repo, coder_config=WRITES_GOVERNANCE, tail="execution: {max_recovery_depth: 0}\n")
    before = _committed(git_repo)
    r = snodo_cli("run", "add a test", cwd=git_repo)  # the human table
    assert r.returncode == 1, r
    assert "sandbox" in r.stdout and ".snodo/protocol.yml" in r.stdout and "validator:tests" in r.stdout, r
    job_id = json.loads(snodo_cli("jobs", "list", "--json", cwd=git_repo).stdout)["jobs"][-1]["job_id"]
    job = snodo_cli("jobs", "show", job_id, "--json", cwd=git_repo).json()
    (refusal,) = job["result"]["sandbox_refusals"]
    assert refusal["path"].endswith(".snodo/protocol.yml") and refusal["reported_by"] == "validator:tests"
    (event,) = _events(git_repo, "sandbox_refusal")
    assert event["path"] == refusal["path"] and event["reported_by"] == "validator:tests"
    assert (git_repo / ".snodo" / "protocol.yml").read_bytes() == before


def test_run_tests_over_mcp_audits_and_says_what_the_sandbox_refused(backend: str, tmp_path: Path) -> None:
    home = tmp_path / "home"
    root = make_project(
        tmp_path / "repo",
        OPENCODE_PROTOCOL.replace("opencode", "mock")
        .replace("{timeout: 60}", "{}")
        .replace("[read, edit, validate, dispatch]", "[read, edit, test]"),
    )
    before = _committed(root)
    with serve(root, home, "--mode", "producer", env={"SNODO_SANDBOX_BACKEND": backend}) as producer:
        producer.ok(
            "write_file",
            {"path": "tests/test_w.py", "content": "def test_w():\n    open('.snodo/protocol.yml', 'w').write('x')\n"},
        )
        reply = producer.ok("run_tests", {})
    assert reply["passed"] is False
    (refusal,) = reply["sandbox_refusals"]
    assert refusal["path"].endswith(".snodo/protocol.yml") and "sandbox_refusal" in reply["note"]
    (event,) = [e["data"] for e in audit(root, "sandbox_refusal")]
    assert event["path"] == refusal["path"] and event["reported_by"] == "run_tests" and event["session_id"]
    assert (root / ".snodo" / "protocol.yml").read_bytes() == before
