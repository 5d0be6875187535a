"""SIGINT/SIGTERM through real signals: `snodo run` (foreground and as a job) and `snodo serve`
stop with no process left behind; the run's job reads `interrupted`."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from snodo.engine.worktree import project_key
from tests.conftest import NO_SECRETS, git, write_producer_protocol

SLOW_SUITE = json.dumps(
    {
        "files": {
            "src/slow.py": "X = 1\n",
            "tests/test_slow.py": "import time\n\ndef test_slow():\n    time.sleep(120)\n",
        }
    }
)


SECRET = "AKIA" + "Q7ZT4NEXAMPLE2K5"
SLOW_SUITE_WITH_SECRET = json.dumps(
    {
        "files": {
            "src/slow.py": f'KEY = "{SECRET}"\n',
            "tests/test_slow.py": "import time\n\ndef test_slow():\n    time.sleep(120)\n",
        }
    }
)


def write_protocol(repo: Path, suite: str = SLOW_SUITE, *, commit: bool = True) -> None:
    write_producer_protocol(repo, coder_config=suite, tests_extra=", tooling: {timeout: 300}", tail=NO_SECRETS)
    if commit:  # (a protocol dictating a secret stays uncommitted: only the run's work may hold it)
        git(repo, "add", ".snodo/protocol.yml")
        git(repo, "commit", "-qm", "protocol")


def descendants(pid: int) -> dict[int, str]:
    """Every live descendant of ``pid``, with its command line."""
    parents: dict[int, int] = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                stat = Path(f"/proc/{entry}/stat").read_text()
            except OSError:
                continue
            fields = stat.rsplit(")", 1)[1].split()
            if fields[0] != "Z":
                parents[int(entry)] = int(fields[1])
    found, frontier = {}, [pid]
    while frontier:
        current = frontier.pop()
        for child, parent in parents.items():
            if parent == current and child not in found:
                try:
                    found[child] = Path(f"/proc/{child}/cmdline").read_bytes().replace(b"\0", b" ").decode()
                except OSError:
                    continue
                frontier.append(child)
    return found


def wait_for_pytest_child(pid: int, timeout: float = 120) -> dict[int, str]:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        sessions = {p for p, cmd in descendants(pid).items() if "pytest" in cmd}  # snodo_judged_pytest.py
        if sessions:
            time.sleep(1.0)  # let it reach the slow test; the base's quick session may end meanwhile
            kids = descendants(pid)
            if sessions & set(kids):  # the same session still running: the one with the slow test
                return kids
        time.sleep(0.2)
    pytest.fail("the run never started its post_execute test suite")


def alive(pids: list[int]) -> list[int]:
    left = []
    for pid in pids:
        try:
            state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
        except OSError:
            continue
        if state != "Z":
            left.append(pid)
    return left


def wait_gone(pids: list[int], timeout: float = 10) -> list[int]:
    deadline = time.monotonic() + timeout
    while alive(pids) and time.monotonic() < deadline:
        time.sleep(0.1)
    return alive(pids)


def events(repo: Path) -> list[dict]:  # type: ignore[type-arg]
    return [json.loads(line) for line in (repo / ".git" / "snodo" / "audit.log").read_text().splitlines()]


@pytest.mark.slow
@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM])
def test_signal_during_a_foreground_run(git_repo: Path, snodo_home: Path, snodo_cli, sig: signal.Signals) -> None:  # type: ignore[no-untyped-def]
    write_protocol(git_repo)
    proc = subprocess.Popen(
        [sys.executable, "-m", "snodo", "run", "slow work", "--json"],
        cwd=git_repo,
        env={**os.environ, "SNODO_HOME": str(snodo_home)},
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
    )
    kids = wait_for_pytest_child(proc.pid)
    proc.send_signal(sig)
    out, _ = proc.communicate(timeout=60)
    assert proc.returncode == 130, out
    assert wait_gone(list(kids)) == [], kids  # the pytest child and its workers are gone
    payload = json.loads(out)
    assert payload["status"] == "halted" and payload["outcome"] == "interrupted"
    assert payload["phase"] == "post_execute" and sig.name in payload["message"]

    job = snodo_cli("jobs", "show", payload["job_id"], "--json", cwd=git_repo).json()
    assert job["status"] == "halted" and job["outcome"] == "interrupted"
    assert job["interrupted"]["signal"] == sig.name
    assert any("pytest" in p for p in job["interrupted"]["processes"]), job["interrupted"]
    halts = [e["data"] for e in events(git_repo) if e["event"] == "halt"]
    assert halts[-1]["outcome"] == "interrupted"
    directory = snodo_home / "worktrees" / project_key(git_repo)
    # The working copy went back to the pool: its slot names no run for the next one to reclaim.
    (lock,) = directory.glob("pool.locks/*.lock")
    assert "run_id" not in json.loads(lock.read_text())
    # The commit the run made is kept for inspection, not on a branch.
    assert payload["halted_ref"] and "src/slow.py" in git(git_repo, "show", "--stat", payload["halted_ref"])
    assert snodo_cli("audit", "verify", cwd=git_repo).returncode == 0


@pytest.mark.slow
def test_an_interrupted_run_keeps_no_unjudged_secret(git_repo: Path, snodo_home: Path) -> None:
    """Interrupted before its constraints ran, the run's commit is judged before it is kept."""
    write_protocol(git_repo, SLOW_SUITE_WITH_SECRET, commit=False)
    proc = subprocess.Popen(
        [sys.executable, "-m", "snodo", "run", "slow work", "--json"],
        cwd=git_repo,
        env={**os.environ, "SNODO_HOME": str(snodo_home)},
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
    )
    wait_for_pytest_child(proc.pid)
    proc.send_signal(signal.SIGINT)
    out, _ = proc.communicate(timeout=60)
    assert proc.returncode == 130, out
    payload = json.loads(out)
    assert payload["outcome"] == "interrupted" and payload["halted_ref"] is None
    assert payload["discarded"]["constraints"][0]["predicate"] == "no_secrets_in_diff"
    assert "refs/snodo" not in git(git_repo, "for-each-ref")
    for args in (("log", "--all", "-p"), ("log", "--reflog", "-p")):
        assert SECRET not in git(git_repo, *args)


@pytest.mark.slow
def test_sigterm_to_a_background_job(git_repo: Path, snodo_home: Path, snodo_cli) -> None:  # type: ignore[no-untyped-def]
    write_protocol(git_repo)
    started = snodo_cli("run", "slow work", "--background", "--json", cwd=git_repo)
    assert started.returncode == 0, started
    job_id = started.json()["job_id"]
    status = git_repo / ".git" / "snodo" / "jobs" / job_id / "status.json"
    deadline = time.monotonic() + 30
    while not json.loads(status.read_text()).get("pid") and time.monotonic() < deadline:
        time.sleep(0.1)
    pid = json.loads(status.read_text())["pid"]
    kids = wait_for_pytest_child(pid)
    os.kill(pid, signal.SIGTERM)
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        job = snodo_cli("jobs", "show", job_id, "--json", cwd=git_repo).json()
        if job["status"] == "halted":
            break
        time.sleep(0.3)
    assert job["outcome"] == "interrupted", job
    assert job["interrupted"]["signal"] == "SIGTERM"
    assert wait_gone([pid, *kids]) == []
    shown = snodo_cli("jobs", "show", job_id, cwd=git_repo)
    assert "stopped   by SIGTERM" in shown.stdout and "killed:" in shown.stdout


INIT = {
    "jsonrpc": "2.0",
    "id": 1,
    "method": "initialize",
    "params": {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "t", "version": "0"}},
}


@pytest.mark.slow
@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM])
def test_serve_stops_on_a_signal_with_a_test_run_in_flight(
    git_repo: Path, snodo_home: Path, sig: signal.Signals
) -> None:
    write_protocol(git_repo)
    (git_repo / "tests").mkdir()
    (git_repo / "tests" / "test_slow.py").write_text("import time\n\ndef test_slow():\n    time.sleep(120)\n")
    proc = subprocess.Popen(
        [sys.executable, "-m", "snodo", "serve"],
        cwd=git_repo,
        env={**os.environ, "SNODO_HOME": str(snodo_home)},
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    assert proc.stdin is not None and proc.stdout is not None and proc.stderr is not None
    proc.stderr.readline()  # "snodo serve: mode … on stdio"
    for message in (
        INIT,
        {"jsonrpc": "2.0", "method": "notifications/initialized"},
        {"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {"name": "run_tests", "arguments": {}}},
    ):
        proc.stdin.write(json.dumps(message) + "\n")
        proc.stdin.flush()
    assert json.loads(proc.stdout.readline())["id"] == 1
    kids = wait_for_pytest_child(proc.pid)
    proc.send_signal(sig)  # stdin stays open: the server must not wait for it
    try:
        proc.wait(timeout=30)
    finally:
        proc.kill()
        proc.communicate()
    assert proc.returncode == 0
    assert wait_gone(list(kids)) == [], kids
    stopped = [e["data"] for e in events(git_repo) if e["event"] == "serve_stopped"]
    assert stopped == [{"signal": sig.name}]


HANDLER_UNDER_LOCK = """
import os, signal, sys, threading, time
from pathlib import Path
from snodo.engine.interrupt import Interrupted, interruptible
from snodo.process import runner

def start():
    try:
        runner.run_process(["sleep", "60"], cwd=Path.cwd(), timeout=120)
    except BaseException:
        pass
threading.Thread(target=start, daemon=True).start()
deadline = time.monotonic() + 30
while not runner.live_processes() and time.monotonic() < deadline:
    time.sleep(0.02)
pid = next(iter(runner._LIVE))
with interruptible():
    try:
        with runner._LIVE_LOCK:  # the main thread inside the registry's lock, as when it starts a child
            os.kill(os.getpid(), signal.SIGTERM)
            for _ in range(1000):
                sum(range(10))
        print("no interrupt")
    except Interrupted as exc:
        print(exc)
def alive(pid):
    try:
        with open(f"/proc/{pid}/stat") as fh:
            return fh.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False
time.sleep(0.2)
print("child alive" if alive(pid) else "child gone")
"""


def test_a_signal_while_the_main_thread_holds_the_process_registry_interrupts_without_deadlock(tmp_path: Path) -> None:
    """The handler runs in the main thread between any two bytecodes, the registry's lock held or not;
    it lists and kills the children (here a real one) under that lock: it must not wait for itself."""
    out = subprocess.run(
        [sys.executable, "-c", HANDLER_UNDER_LOCK], cwd=tmp_path, capture_output=True, text=True, timeout=30
    )
    assert out.returncode == 0, out.stderr
    assert out.stdout.split("\n")[:2] == ["interrupted by SIGTERM", "child gone"], out.stdout + out.stderr
