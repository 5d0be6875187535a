"""The stdio transport of `snodo serve` (snodo/mcp/server.py), spoken to by hand over real pipes.

What a host can send and expect at the byte level: a request split across writes (inside a
UTF-8 character), a reply far larger than a pipe's buffer, the wire claimed while serving
(descriptor 0 reads nothing, descriptor 1 writes to stderr), the end of input ending the
server once every request read is answered (or the client stopped reading), also when the
input is a regular file.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import IO, Any

from mcp_harness import make_project, server_env

PROTOCOL = """\
protocol_id: t
name: t
modes:
  - mode_id: reader
    tools: [read]
    validators: [tests]
validators:
  - {validator_id: tests, validator_type: command, tooling: {command: "true"}}
"""

INITIALIZE = {
    "jsonrpc": "2.0",
    "id": 1,
    "method": "initialize",
    "params": {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "tést", "version": "0"}},
}
INITIALIZED = {"jsonrpc": "2.0", "method": "notifications/initialized"}


def line(message: dict[str, Any]) -> bytes:
    return (json.dumps(message, ensure_ascii=False) + "\n").encode("utf-8")


def reply(stdout: IO[bytes], ident: int) -> dict[str, Any]:
    """The next message with this id (notifications the server may send are skipped)."""
    while True:
        raw = stdout.readline()
        assert raw, "the server ended without answering"
        message: dict[str, Any] = json.loads(raw)
        if message.get("id") == ident:
            return message


def start(project: Path, home: Path, stdin: Any = subprocess.PIPE) -> subprocess.Popen[bytes]:
    return subprocess.Popen(
        [sys.executable, "-m", "snodo", "serve"],
        cwd=project,
        stdin=stdin,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env={**os.environ, **server_env(home)},
    )


def test_split_requests_a_large_reply_and_the_claimed_wire(tmp_path: Path) -> None:
    home = tmp_path / "home"
    project = make_project(tmp_path / "p", PROTOCOL)
    big = "".join(f"line {i:06d} é\n" for i in range(40_000)) + "THE END\n"  # ~600 KB, >> a pipe's 64 KB
    (project / "big.txt").write_text(big, encoding="utf-8")
    proc = start(project, home)
    assert proc.stdin is not None and proc.stdout is not None
    try:
        first = line(INITIALIZE)
        cut = first.index("é".encode()) + 1  # inside the two bytes of é
        proc.stdin.write(first[:cut])
        proc.stdin.flush()
        time.sleep(0.3)
        proc.stdin.write(first[cut:])
        proc.stdin.flush()
        answer = reply(proc.stdout, 1)
        assert answer["result"]["serverInfo"]["name"] == "snodo", answer
        proc.stdin.write(line(INITIALIZED))
        # While serving, descriptor 0 reads the null device and 1 writes where 2 does.
        fd = f"/proc/{proc.pid}/fd"
        assert os.readlink(f"{fd}/0") == os.devnull
        assert os.readlink(f"{fd}/1") == os.readlink(f"{fd}/2")
        # The wire is read from a private descriptor.
        wire = f"pipe:[{os.fstat(proc.stdin.fileno()).st_ino}]"
        wire_fds = {int(n) for n in os.listdir(fd) if os.readlink(f"{fd}/{n}") == wire}
        assert wire_fds and 0 not in wire_fds
        call = {"jsonrpc": "2.0", "id": 2, "method": "tools/call"}
        call["params"] = {"name": "read_file", "arguments": {"path": "big.txt"}}
        proc.stdin.write(line(call))
        proc.stdin.flush()
        answer = reply(proc.stdout, 2)
        assert answer["result"]["isError"] is False, answer
        assert answer["result"]["structuredContent"]["content"] == big
    finally:
        proc.stdin.close()
    assert proc.wait(timeout=60) == 0, proc.stderr.read() if proc.stderr else ""
    proc.stdout.close()
    if proc.stderr is not None:
        assert "Traceback" not in proc.stderr.read().decode()
        proc.stderr.close()


def call(ident: int | str, tool: str, arguments: dict[str, Any]) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": ident, "method": "tools/call", "params": {"name": tool, "arguments": arguments}}


def test_input_from_a_regular_file_is_read_to_its_end_and_every_request_answered(tmp_path: Path) -> None:
    home = tmp_path / "home"
    project = make_project(tmp_path / "p", PROTOCOL)
    (project / "notes.txt").write_text("from a file\n")
    requests = tmp_path / "requests.jsonl"
    # The file ends at once, with both calls still to run: they are answered before the
    # server ends.
    requests.write_bytes(
        line(INITIALIZE)
        + line(INITIALIZED)
        + line(call(2, "list_files", {"path": "."}))
        + line(call('dré"3', "read_file", {"path": "notes.txt"}))
        # Not JSON-RPC 2.0: the SDK answers nothing, so nothing is waited for.
        + line({"jsonrpc": "1.0", "id": 4, "method": "ping"})
    )
    with requests.open("rb") as stdin:
        proc = start(project, home, stdin=stdin)
        out, err = proc.communicate(timeout=60)
    assert proc.returncode == 0, err.decode()
    answers = {m.get("id"): m for m in map(json.loads, out.splitlines())}
    assert answers[1]["result"]["serverInfo"]["name"] == "snodo", out
    assert answers[2]["result"]["isError"] is False, answers[2]
    assert answers['dré"3']["result"]["structuredContent"]["content"] == "from a file\n", answers


SLOW = """\
protocol_id: t
name: t
modes:
  - mode_id: checker
    tools: [read, validate]
    validators: [slow]
validators:
  - {validator_id: slow, validator_type: command, evaluation_phase: pre_execute, tooling: {command: "sleep 1.5"}}
"""


def test_requests_still_running_when_input_ends_are_answered_before_the_server_ends(tmp_path: Path) -> None:
    home = tmp_path / "home"
    project = make_project(tmp_path / "p", SLOW)
    proc = start(project, home)
    assert proc.stdin is not None and proc.stdout is not None and proc.stderr is not None
    # A script that pipes its requests in and closes its end at once (the SDK's transport
    # answered the call still running then "Connection closed").
    arguments = {"task_id": "t-1", "task_spec": "Add a module.\n"}
    proc.stdin.write(line(INITIALIZE) + line(INITIALIZED) + line(call(2, "validate_task", arguments)))
    proc.stdin.close()
    out = proc.stdout.read()
    assert proc.wait(timeout=60) == 0
    answers = {m.get("id"): m for m in map(json.loads, out.splitlines())}
    assert "error" not in answers[2], answers[2]
    assert answers[2]["result"]["structuredContent"]["status"] == "pass", answers[2]
    proc.stdout.close()
    assert "Traceback" not in proc.stderr.read().decode()
    proc.stderr.close()


def test_a_client_that_stops_reading_ends_the_wait_for_its_answers(tmp_path: Path) -> None:
    home = tmp_path / "home"
    project = make_project(tmp_path / "p", SLOW.replace("sleep 1.5", "sleep 30"))
    proc = start(project, home)
    assert proc.stdin is not None and proc.stdout is not None and proc.stderr is not None
    proc.stdin.write(line(INITIALIZE))
    proc.stdin.flush()
    reply(proc.stdout, 1)
    arguments = {"task_id": "t-1", "task_spec": "Add a module.\n"}
    proc.stdin.write(line(INITIALIZED) + line(call(2, "validate_task", arguments)))
    proc.stdin.flush()
    time.sleep(1)  # the call runs (its validator sleeps 30 s)
    proc.stdout.close()  # the client is gone: nobody reads the answer
    proc.stdin.close()
    started = time.monotonic()
    proc.wait(timeout=60)
    assert time.monotonic() - started < 20, "the server waited for an answer nobody reads"
    proc.stderr.close()
