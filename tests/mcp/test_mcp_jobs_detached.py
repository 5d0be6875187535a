"""A dispatched job belongs to snodo, not to the host: whatever the session did before, the
job is never a child of ``snodo serve``, so a host that kills the server's process tree when
it leaves does not reach it.

Real server over stdio, real official SDK client, sandbox on (the backend this machine has):
``run_tests`` runs confined first — what made the server the child subreaper for good, and
every later job one of its children — then a job is dispatched, and the test kills the
server's whole process tree as a host does on exit (opencode walks it by parent pid).
"""

from __future__ import annotations

import json
import os
import signal
import time
from pathlib import Path
from typing import Any

import pytest
from mcp_harness import Served, audit, git, make_project, serve

from snodo.base.errors import EnvironmentProblem
from snodo.sandbox import choose_backend

PROTOCOL = """\
protocol_id: detached
name: Detached jobs
modes:
  - mode_id: producer
    tools: [read, edit, test, validate, dispatch]
    validators: [scope, suite]
    coder: mock
    coder_config: {files: {"done.txt": "done\\n"}}
validators:
  - {validator_id: scope, validator_type: protocol}
  - {validator_id: suite, validator_type: pytest, evaluation_phase: post_execute}
"""
SPEC = "Add done.txt."


def _sandbox() -> str:
    try:
        return choose_backend().name
    except EnvironmentProblem as exc:
        pytest.skip(f"needs a working sandbox backend (what makes snodo the child subreaper): {exc}")


def _stat(pid: int) -> list[str]:
    return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()


def _children(pid: int) -> list[int]:
    found = []
    for name in os.listdir("/proc"):
        if name.isdigit():
            try:
                if int(_stat(int(name))[1]) == pid:
                    found.append(int(name))
            except (OSError, IndexError, ValueError):
                continue
    return found


def _tree(pid: int) -> list[int]:
    """``pid`` and every descendant, by parent pid (what a host's tree kill finds)."""
    tree, todo = [], [pid]
    while todo:
        current = todo.pop()
        tree.append(current)
        todo += _children(current)
    return tree


def _server_pid() -> int:
    """The ``snodo serve`` this test process started (the SDK's stdio client spawns it)."""
    (pid,) = [p for p in _children(os.getpid()) if b"serve" in Path(f"/proc/{p}/cmdline").read_bytes()]
    return pid


def _job(root: Path, job_id: str) -> dict[str, Any]:
    return dict(json.loads((root / ".git" / "snodo" / "jobs" / job_id / "status.json").read_text()))


def _wait_for_end(root: Path, job_id: str, timeout: float = 180) -> dict[str, Any]:
    deadline = time.monotonic() + timeout
    status = _job(root, job_id)
    while status["status"] not in ("completed", "halted") and time.monotonic() < deadline:
        time.sleep(0.3)
        status = _job(root, job_id)
    return status


def _project(tmp_path: Path) -> Path:
    root = make_project(tmp_path / "repo", PROTOCOL)
    (root / "tests").mkdir()
    (root / "tests" / "test_ok.py").write_text("def test_ok():\n    assert True\n")
    git(root, "add", "-A")
    git(root, "commit", "-qm", "protocol and suite")
    return root


def _dispatch_after_tests(served: Served) -> str:
    assert served.ok("run_tests")["passed"] is True  # confined: the server was the subreaper here
    assert served.ok("validate_task", {"task_spec": SPEC})["status"] == "pass"
    accepted = served.ok("dispatch_task", {"task_spec": SPEC})
    assert accepted["status"] == "accepted" and accepted["token_consumed"] is True
    return str(accepted["job_id"])


@pytest.mark.slow
def test_a_job_dispatched_after_run_tests_outlives_a_tree_kill_of_the_server(tmp_path: Path) -> None:
    _sandbox()
    root = _project(tmp_path)
    with serve(root, tmp_path / "home", "--mode", "producer") as served:
        server = _server_pid()
        job_id = _dispatch_after_tests(served)
        pid = int(_job(root, job_id)["pid"])
        assert int(_stat(pid)[1]) != server, "the job is a child of the server: a host's tree kill reaches it"
        assert pid not in _tree(server)
        for member in _tree(server):  # what a host does on exit: the server and all it has below
            os.kill(member, signal.SIGKILL)
    status = _wait_for_end(root, job_id)
    assert status["status"] == "completed", status
    assert (root / ".git" / "snodo" / "jobs" / job_id / "status.json").exists()
    assert [e["data"]["job_id"] for e in audit(root, "dispatch_request")] == [job_id]


def test_a_dispatch_under_a_drifted_protocol_is_refused_before_its_token(tmp_path: Path) -> None:
    """A host's own editor changed ``.snodo/protocol.yml`` after the server started: the job
    would refuse it and die, so the dispatch is refused first and the token stays unused."""
    root = _project(tmp_path)
    protocol = root / ".snodo" / "protocol.yml"
    committed = protocol.read_text()
    with serve(root, tmp_path / "home", "--mode", "producer") as served:
        assert served.ok("validate_task", {"task_spec": SPEC})["status"] == "pass"
        protocol.write_text(committed + "# edited by the host's own tool\n")
        refused = served.refused("dispatch_task", {"task_spec": SPEC})
        assert "not the one in force" in refused and "no token was issued or used" in refused, refused
        assert audit(root, "tool_refused")[-1]["data"]["tool"] == "dispatch_task"
        assert not audit(root, "dispatch_request") and not audit(root, "token_consumed")
        assert not (root / ".git" / "snodo" / "jobs").exists() or not list(
            (root / ".git" / "snodo" / "jobs").glob("job-*")
        )
        protocol.write_text(committed)  # back to the rules in force: the same token is still there
        accepted = served.ok("dispatch_task", {"task_spec": SPEC})
        assert accepted["token_consumed"] is True, accepted
    assert _wait_for_end(root, str(accepted["job_id"]))["status"] == "completed"


def test_a_job_that_cannot_load_its_protocol_records_why(tmp_path: Path) -> None:
    """The job's own guard (a drift after the dispatch was accepted): it ends ``halted`` with
    the reason in its record, never ``queued`` behind a dead pid."""
    from snodo.engine.jobs import JobStore

    root = _project(tmp_path)
    protocol = root / ".snodo" / "protocol.yml"
    store = JobStore(root)
    job = store.create(
        spec=SPEC, task_id="t-drift", mode="producer", coder=None, background=True, protocol_path=protocol
    )
    protocol.write_text(protocol.read_text() + "# edited by the host's own tool\n")
    store.start_background(str(job["job_id"]))
    status = _wait_for_end(root, str(job["job_id"]), timeout=60)
    assert status["status"] == "halted" and status["outcome"] == "environment_error", status
    assert "not the one in force" in status["error"], status
