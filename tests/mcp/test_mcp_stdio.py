"""The stdio transport of `snodo serve` (snodo/mcp/stdio.py), spoken to by hand over real pipes.

What a host can send and expect at the byte level: a request split across writes (inside a
UTF-8 character), a reply far larger than a pipe's buffer, the wire claimed while serving
(descriptor 0 reads nothing, descriptor 1 writes to stderr), the end of input ending the
server; and input from a regular file, which the event loop cannot wait on, served by the
SDK's own transport.
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
  - {validator_id: tests, validator_type: pytest, tooling: {command: "true"}}
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
        # No thread is parked in read() on the wire: the event loop waits on it (x86_64 read: 0).
        wire = f"pipe:[{os.fstat(proc.stdin.fileno()).st_ino}]"
        wire_fds = {int(n) for n in os.listdir(fd) if os.readlink(f"{fd}/{n}") == wire}
        assert wire_fds and 0 not in wire_fds
        time.sleep(0.2)
        for task in os.listdir(f"/proc/{proc.pid}/task"):
            fields = Path(f"/proc/{proc.pid}/task/{task}/syscall").read_text().split()
            assert not (os.uname().machine == "x86_64" and fields[0] == "0" and int(fields[1], 16) in wire_fds), task
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


def test_input_from_a_regular_file_is_served_by_the_sdk_transport(tmp_path: Path) -> None:
    home = tmp_path / "home"
    project = make_project(tmp_path / "p", PROTOCOL)
    requests = tmp_path / "requests.jsonl"
    # Only the handshake: the file ends at once, and a request still in flight when input
    # ends is dropped by the SDK's server (a host keeps its pipe open), so nothing else.
    requests.write_bytes(line(INITIALIZE) + line(INITIALIZED))
    with requests.open("rb") as stdin:
        proc = start(project, home, stdin=stdin)
        out, err = proc.communicate(timeout=60)
    assert proc.returncode == 0, err.decode()
    answers = {m.get("id"): m for m in map(json.loads, out.splitlines())}
    assert answers[1]["result"]["serverInfo"]["name"] == "snodo", out
