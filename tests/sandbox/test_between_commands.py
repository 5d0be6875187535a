"""What one confined command can do to another, to what the next finds, and to its own
bubblewrap init. Real processes, checked from the host's process table and file system,
not only from what the commands say.
"""

from __future__ import annotations

import os
import sys
import textwrap
import threading
import time
from pathlib import Path

import pytest

from snodo.process.runner import ProcessResult, run_process
from snodo.sandbox import SandboxPolicy


def _ws(tmp_path: Path) -> Path:
    ws = tmp_path / "ws"
    ws.mkdir()
    return ws


def _run(code: str, ws: Path, timeout: float = 60) -> ProcessResult:
    return run_process(
        [sys.executable, "-c", textwrap.dedent(code)], cwd=ws, timeout=timeout, sandbox=SandboxPolicy(workspace=ws)
    )


def _host_pids_with(token: str) -> list[int]:
    found = []
    for name in os.listdir("/proc"):
        if name.isdigit():
            try:
                if token.encode() in Path(f"/proc/{name}/cmdline").read_bytes():
                    found.append(int(name))
            except OSError:
                continue
    return found


#: What a command tries against another process it can name: read its memory, environment
#: and descriptors, attach with ptrace, kill it. Each outcome is printed.
TARGETED = """
    import ctypes, os, signal, sys
    libc = ctypes.CDLL(None, use_errno=True)

    def probe(pid, fds):
        for what in ("mem", "environ"):
            try:
                open(f"/proc/{pid}/{what}", "rb").read(16)
                print("READ", pid, what)
            except OSError as exc:
                print("DENIED", pid, what, exc.errno)
        for entry in fds:
            try:
                os.close(os.open(f"/proc/{pid}/fd/{entry}", os.O_RDONLY))
                print("OPENED", pid, entry)
            except OSError as exc:
                print("DENIED", pid, "fd", entry, exc.errno)
        print("PTRACE", pid, libc.ptrace(16, pid, 0, 0), ctypes.get_errno())  # PTRACE_ATTACH
        try:
            os.kill(pid, signal.SIGKILL)
            print("KILLED", pid)
        except OSError as exc:
            print("DENIED", pid, "kill", exc.errno)

    token, me = "-".join(sys.argv[1:]).encode(), os.getpid()  # in pieces: not in its own command line
    for name in os.listdir("/proc"):
        try:
            if not name.isdigit() or int(name) == me or token not in open(f"/proc/{name}/cmdline", "rb").read():
                continue
        except OSError:
            continue
        print("FOUND", int(name))
        probe(int(name), ("0", "1", "2"))
    print("ATTACK DONE")
"""


def test_two_concurrent_commands_cannot_reach_each_other(backend: str, tmp_path: Path) -> None:
    ws = _ws(tmp_path)
    token = f"victim-{os.getpid()}-{time.monotonic_ns()}"
    victim_code = f"""
        import time
        secret = "{token}"
        open("started", "w").write("1")
        time.sleep(3)
        print("VICTIM", secret, "intact")
    """
    outcome: dict[str, ProcessResult] = {}

    def run_victim() -> None:
        outcome["victim"] = _run(victim_code, ws)

    victim = threading.Thread(target=run_victim)
    victim.start()
    deadline = time.monotonic() + 30
    while not (ws / "started").exists() and time.monotonic() < deadline:
        time.sleep(0.02)
    assert _host_pids_with(token), "the victim is running (seen from the host)"
    attack = run_process(
        [sys.executable, "-c", textwrap.dedent(TARGETED), *token.split("-")],
        cwd=ws,
        timeout=60,
        sandbox=SandboxPolicy(workspace=ws),
    )
    victim.join(60)
    assert "ATTACK DONE" in attack.output, attack.output
    for refused in ("READ", "OPENED", "KILLED"):
        assert refused not in attack.output, attack.output
    assert all(line.split()[-2] == "-1" for line in attack.output.splitlines() if line.startswith("PTRACE"))
    if backend == "bwrap":  # its own PID namespace: the other command is not even visible
        assert "FOUND" not in attack.output, attack.output
    else:  # one PID namespace with the host: found, and refused
        assert "FOUND" in attack.output, attack.output
    assert outcome["victim"].ok and f"VICTIM {token} intact" in outcome["victim"].output


def test_a_command_cannot_end_bubblewraps_init_early(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """bubblewrap's init (pid 1, which reports the status) ignores every signal the command
    sends it: the status is still the command's own."""
    monkeypatch.setenv("SNODO_SANDBOX_BACKEND", "bwrap")
    ws = _ws(tmp_path)
    code = """
        import os, signal, time
        for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP, signal.SIGUSR1, signal.SIGKILL):
            os.kill(1, sig)
        time.sleep(0.3)
        print("still here")
        raise SystemExit(3)
    """
    result = _run(code, ws)
    assert result.returncode == 3 and "still here" in result.output, result.output


def test_a_daemonised_child_is_dead_when_the_result_returns(backend: str, tmp_path: Path) -> None:
    ws = _ws(tmp_path)
    stamp = f"{(time.monotonic_ns() % 900) + 100}.{os.getpid() % 1000}"
    code = f"""
        import os
        if os.fork() == 0:
            os.setsid()
            if os.fork() == 0:
                os.execvp("sleep", ["sleep", "{stamp}"])
            os._exit(0)
        print("daemonised", flush=True)
    """
    result = _run(code, ws)
    assert result.ok and "daemonised" in result.output, result.output
    assert _host_pids_with(f"sleep\0{stamp}") == [], "the daemon outlived its command's result"


def test_nothing_a_command_leaves_in_its_temporary_directories_is_seen_by_the_next(
    backend: str, tmp_path: Path
) -> None:
    ws = _ws(tmp_path)
    leave = """
        import os, tempfile
        for folder in (tempfile.gettempdir(), os.environ["HOME"], "/tmp", "/dev/shm"):
            try:
                open(os.path.join(folder, "left-behind"), "w").write("x")
                print("LEFT", folder)
            except OSError:
                pass
    """
    look = """
        import os, tempfile
        for folder in (tempfile.gettempdir(), os.environ["HOME"], "/tmp", "/dev/shm"):
            if os.path.exists(os.path.join(folder, "left-behind")):
                print("FOUND", folder)
        print("LOOKED")
    """
    left = _run(leave, ws)
    assert "LEFT" in left.output, left.output  # at least its own TMPDIR was writable
    seen = _run(look, ws)
    assert "LOOKED" in seen.output and "FOUND" not in seen.output, (left.output, seen.output)
