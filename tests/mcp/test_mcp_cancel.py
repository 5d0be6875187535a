"""A host that gives up on a call (``notifications/cancelled``) stops its processes at once.

Real server over stdio, real official SDK client: the client's own call timeout sends the
cancellation, as a host's timeout does. The suite under test starts a grandchild and writes
both pids; after the cancel neither may be alive a second later, the server keeps serving,
and the audit log says ``tool_cancelled``.
"""

from __future__ import annotations

import os
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


def test_a_host_closing_our_input_is_recorded_as_serve_stopped(tmp_path: Path) -> None:
    root = make_project(tmp_path / "repo", PROTOCOL)
    with serve(root, tmp_path / "home", "--mode", "dev") as served:
        served.ok("list_files", {"path": "."})
    deadline = time.monotonic() + 10
    while not audit(root, "serve_stopped") and time.monotonic() < deadline:
        time.sleep(0.1)
    assert [e["data"] for e in audit(root, "serve_stopped")] == [{"reason": "end of input"}]
