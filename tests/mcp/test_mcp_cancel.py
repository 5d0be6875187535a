"""A host that gives up on a call (``notifications/cancelled``) stops its processes at once.

Real server over stdio, real official SDK client: the client's own call timeout sends the
cancellation, as a host's timeout does. The suite under test starts a grandchild and writes
both pids; after the cancel neither may be alive a second later, the server keeps serving,
and the audit log says ``tool_cancelled``.
"""

from __future__ import annotations

import os
import signal
import time
from pathlib import Path

import pytest
from mcp_harness import audit, git, make_project, serve

PROTOCOL = """\
protocol_id: cancel
name: Cancel test
modes:
  - mode_id: dev
    tools: [read, edit, test, validate]
    validators: [suite]
validators:
  - {validator_id: suite, validator_type: pytest, evaluation_phase: post_execute}
execution: {sandbox: "off"}
"""

SLOW_TEST = """\
import os, subprocess, sys, time
from pathlib import Path

def test_slow():
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(120)"])
    (Path(__file__).parent.parent / "pids").write_text(f"{os.getpid()} {child.pid}")
    time.sleep(120)
"""


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    try:
        return Path(f"/proc/{pid}/stat").read_text().split(")")[-1].split()[0] != "Z"
    except OSError:
        return False


@pytest.mark.slow
def test_a_cancelled_run_tests_leaves_no_process_behind(tmp_path: Path) -> None:
    root = make_project(tmp_path / "repo", PROTOCOL)
    (root / "tests").mkdir()
    (root / "tests" / "test_slow.py").write_text(SLOW_TEST)
    git(root, "add", "-A")
    git(root, "commit", "-qm", "protocol and a slow suite")
    pids_file = root / "pids"  # sandbox off: the pids are the host's, not a namespace's
    with serve(root, tmp_path / "home", "--mode", "dev") as served:
        progress: list[float] = []

        async def on_progress(value: float, _total: float | None, _message: str | None) -> None:
            progress.append(value)

        started = time.monotonic()
        with pytest.raises(Exception) as info:  # the client's timeout: it sends notifications/cancelled
            served.portal.call(
                lambda: served.session.call_tool("run_tests", {}, read_timeout_seconds=8, progress_callback=on_progress)
            )
        cancelled_at = time.monotonic()
        assert cancelled_at - started < 30, info.value
        assert pids_file.exists(), "the suite never started"
        pids = [int(p) for p in pids_file.read_text().split()]
        while any(_alive(p) for p in pids) and time.monotonic() < cancelled_at + 1.0:
            time.sleep(0.02)
        assert not [p for p in pids if _alive(p)], "a process of the cancelled call is still alive after 1 s"
        assert progress, "run_tests sent no progress notification in 8 s"
        # the server keeps serving, and says what happened
        assert served.ok("list_files", {"path": "."})["count"] >= 1
        deadline = time.monotonic() + 10
        while not audit(root, "tool_cancelled") and time.monotonic() < deadline:
            time.sleep(0.1)
        assert [e["data"]["tool"] for e in audit(root, "tool_cancelled")] == ["run_tests"]


def _server_pid() -> int:
    """The ``snodo serve`` this test process started (the SDK's stdio client spawns it)."""
    me = str(os.getpid())
    found = []
    for name in os.listdir("/proc"):
        try:
            if name.isdigit() and Path(f"/proc/{name}/stat").read_text().rsplit(")", 1)[1].split()[1] == me:
                found.append(int(name))
        except OSError:
            continue
    (pid,) = [p for p in found if b"serve" in Path(f"/proc/{p}/cmdline").read_bytes()]
    return pid


@pytest.mark.slow
@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM])
def test_a_server_stopped_during_run_tests_reports_and_audits_the_call_cancelled(
    tmp_path: Path, signum: signal.Signals
) -> None:
    """A host that quits (SIGTERM) or is interrupted (SIGINT to its process group) while
    run_tests runs: the model is told the call was cancelled, not that the suite exited
    -9, and the audit log has the cancellation before the server's stop."""
    root = make_project(tmp_path / "repo", PROTOCOL)
    (root / "tests").mkdir()
    (root / "tests" / "test_slow.py").write_text(SLOW_TEST)
    git(root, "add", "-A")
    git(root, "commit", "-qm", "protocol and a slow suite")
    pids_file = root / "pids"
    with serve(root, tmp_path / "home", "--mode", "dev") as served:
        server = _server_pid()
        pending = served.portal.start_task_soon(served.session.call_tool, "run_tests", {})
        deadline = time.monotonic() + 60
        while not pids_file.exists() and time.monotonic() < deadline:
            time.sleep(0.05)
        assert pids_file.exists(), "the suite never started"
        os.kill(server, signum)
        result = pending.result(timeout=30)
        text = result.content[0].text
        assert result.is_error, text
        assert "run_tests was cancelled" in text and signum.name in text, text
        assert "exit_code" not in text
        pids = [int(p) for p in pids_file.read_text().split()]
        assert not [p for p in pids if _alive(p)], "a process of the cancelled call is still alive"
    events = [e["event"] for e in audit(root) if e["event"] in ("tool_cancelled", "serve_stopped")]
    assert events == ["tool_cancelled", "serve_stopped"], events
    (cancelled,) = audit(root, "tool_cancelled")
    assert cancelled["data"]["tool"] == "run_tests" and signum.name in cancelled["data"]["reason"]


def test_a_host_closing_our_input_is_recorded_as_serve_stopped(tmp_path: Path) -> None:
    root = make_project(tmp_path / "repo", PROTOCOL)
    with serve(root, tmp_path / "home", "--mode", "dev") as served:
        served.ok("list_files", {"path": "."})
    deadline = time.monotonic() + 10
    while not audit(root, "serve_stopped") and time.monotonic() < deadline:
        time.sleep(0.1)
    assert [e["data"] for e in audit(root, "serve_stopped")] == [{"reason": "end of input"}]
