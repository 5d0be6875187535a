"""The confined launcher (snodo/sandbox/launcher.py): what one confined command can do to the
launcher and to another command, what one leaves for the next, and what a hostile workspace
or environment can do to the launcher itself. Real bubblewrap, real processes; checked from
the host's process table and file system, not only from what the commands say.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from snodo.errors import EnvironmentProblem
from snodo.proc import ProcessResult, run_process
from snodo.sandbox import SandboxPolicy, launcher


@pytest.fixture
def use_launcher(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """Every bubblewrap command goes through a launcher (the first one waits for it)."""
    monkeypatch.setattr(launcher, "FIRST_USE_WAIT", 60.0)
    monkeypatch.setattr(launcher, "START_AFTER", 0)
    monkeypatch.setenv("SNODO_SANDBOX_BACKEND", "bwrap")
    launcher.close_all()
    yield
    launcher.close_all()


def _only_launcher() -> launcher.Launcher:
    assert launcher.refused() == {}
    live = list(launcher._LAUNCHERS.values())
    assert len(live) == 1 and live[0].alive()
    return live[0]


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
#: and descriptors (``fds``), attach with ptrace, kill it. Each outcome is printed.
PROBE = """
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
"""

#: The probe against every process the command can see, then signals to all of them.
ATTACK = (
    PROBE
    + """
    me = os.getpid()
    seen = sorted(int(p) for p in os.listdir("/proc") if p.isdigit())
    print("SEEN", seen)
    for pid in seen:
        if pid == me:
            continue
        cmd = open(f"/proc/{pid}/cmdline", "rb").read().replace(b"\\0", b" ")[:80]
        print("PROC", pid, cmd)
        try:
            entries = os.listdir(f"/proc/{pid}/fd")
        except OSError:
            entries = []
        probe(pid, entries)
    for sig in (signal.SIGKILL, signal.SIGTERM):
        try:
            os.kill(-1, sig)
        except OSError:
            pass
    print("ATTACK DONE")
"""
)


def test_a_command_sees_only_its_own_processes_and_cannot_touch_the_launcher(
    use_launcher: None, tmp_path: Path
) -> None:
    ws = _ws(tmp_path)
    assert _run("print('warm')", ws).ok
    first = _only_launcher()
    result = _run(ATTACK, ws)
    assert "ATTACK DONE" in result.output, result.output
    # Its own PID namespace: pid 1 (its init, which starts and reaps it) and itself.
    seen = next(line for line in result.output.splitlines() if line.startswith("SEEN"))
    assert seen == "SEEN [1, 2]", result.output
    # Its init is not dumpable: no memory, environment, descriptors nor ptrace.
    assert "READ" not in result.output and "OPENED" not in result.output, result.output
    assert all(line.split()[-2] == "-1" for line in result.output.splitlines() if line.startswith("PTRACE"))
    # The launcher is untouched and serves the next command.
    assert first.alive() and _only_launcher() is first
    assert _run("print('after')", ws).output.strip() == "after"


#: The probe against the processes whose command line holds the token given in pieces
#: (never anything else: under Landlock the host's processes are visible).
TARGETED = (
    PROBE
    + """
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
)


def test_a_command_cannot_end_its_init_early(use_launcher: None, tmp_path: Path) -> None:
    """Its init (pid 1, which reports its status) ignores every signal the command sends."""
    ws = _ws(tmp_path)
    code = """
        import os, signal, time
        for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP, signal.SIGUSR1, signal.SIGKILL):
            os.kill(1, sig)
        time.sleep(0.3)
        print("still here")
        raise SystemExit(3)
    """
    for _ in range(2):
        result = _run(code, ws)
        assert result.returncode == 3 and "still here" in result.output, result.output


def test_two_concurrent_commands_cannot_reach_each_other(
    backend: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    ws = _ws(tmp_path)
    token = f"victim-{os.getpid()}-{time.monotonic_ns()}"
    victim_code = f"""
        import time
        secret = "{token}"
        open("started", "w").write("1")
        time.sleep(3)
        print("VICTIM", secret, "intact")
    """
    for path in _paths(backend):
        _choose(path, monkeypatch)
        (ws / "started").unlink(missing_ok=True)
        outcome: dict[str, ProcessResult] = {}

        def run_victim(into: dict[str, ProcessResult] = outcome) -> None:
            into["victim"] = _run(victim_code, ws)

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
            assert refused not in attack.output, (path, attack.output)
        assert all(line.split()[-2] == "-1" for line in attack.output.splitlines() if line.startswith("PTRACE"))
        if path == "launcher":  # its own PID namespace: the other command is not even visible
            assert "FOUND" not in attack.output, attack.output
        if backend == "landlock":  # one PID namespace with the host: found, and refused
            assert "FOUND" in attack.output, attack.output
        assert outcome["victim"].ok and f"VICTIM {token} intact" in outcome["victim"].output, path
    launcher.close_all()


def test_killing_the_launcher_fails_only_the_running_call_and_the_next_gets_a_new_one(
    use_launcher: None, tmp_path: Path
) -> None:
    ws = _ws(tmp_path)
    assert _run("print('warm')", ws).ok
    first = _only_launcher()
    caught: list[BaseException] = []

    def long_call() -> None:
        try:
            _run("import time; open('started', 'w').write('1'); time.sleep(30)", ws)
        except BaseException as exc:  # the test inspects it
            caught.append(exc)

    call = threading.Thread(target=long_call)
    call.start()
    deadline = time.monotonic() + 30
    while not (ws / "started").exists() and time.monotonic() < deadline:
        time.sleep(0.02)
    os.killpg(first.proc.pid, signal.SIGKILL)  # what a process of the same uid could do
    call.join(30)
    assert not call.is_alive()
    assert len(caught) == 1 and isinstance(caught[0], EnvironmentProblem), caught
    assert "launcher ended" in str(caught[0])
    # The next call starts a fresh launcher and works.
    assert _run("print('again')", ws).output.strip() == "again"
    assert _only_launcher() is not first


def _wait_for_spare(launcher_: launcher.Launcher) -> None:
    """Until the launcher has handed over its next spare init (made once no command runs)."""
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        with launcher_.lock:
            spare = launcher_._take_spare()
            launcher_._spare = spare
        if spare is not None:
            return
        time.sleep(0.01)
    raise AssertionError("no spare init was handed over")


def _children(pid: int) -> list[int]:
    found = []
    for name in os.listdir("/proc"):
        if name.isdigit():
            try:
                stat = Path(f"/proc/{name}/stat").read_text()
            except OSError:
                continue
            if int(stat.rsplit(")", 1)[1].split()[1]) == pid:
                found.append(int(name))
    return found


def test_a_command_goes_straight_to_a_spare_init_and_is_still_killed_whole(use_launcher: None, tmp_path: Path) -> None:
    """Once the launcher has handed over a spare init, a command is sent to it directly (no
    hop through the launcher); its output, exit status and kill on timeout are as before."""
    ws = _ws(tmp_path)
    assert _run("print('warm')", ws).ok
    live = _only_launcher()
    for i in range(3):
        _wait_for_spare(live)
        before = live.direct
        result = _run(f"import sys; print('direct {i}'); sys.exit({i})", ws)
        assert (result.returncode, result.output.strip()) == (i, f"direct {i}")
        assert live.direct == before + 1
    _wait_for_spare(live)
    token = f"orphan-{time.monotonic_ns()}"
    result = _run(
        f"""
        import subprocess, time
        subprocess.Popen(["sleep", "{token[-6:]}2"], start_new_session=True)
        print("spawned", flush=True)
        time.sleep(60)
        """,
        ws,
        timeout=3,
    )
    assert result.timed_out and "spawned" in result.output
    assert _host_pids_with(f"sleep\0{token[-6:]}2") == []
    assert _only_launcher() is live


def _gone(pid: int) -> bool:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] == "Z"
    except OSError:
        return True


def test_a_spare_init_that_died_before_use_is_not_used(
    use_launcher: None, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A spare init killed from outside costs the next command nothing but its speed: it is
    not sent there (its socket is dead), the launcher starts it and hands over a new spare."""
    ws = _ws(tmp_path)
    assert _run("print('warm')", ws).ok
    live = _only_launcher()
    _wait_for_spare(live)
    (inner,) = _children(live.proc.pid)  # bubblewrap's init; the launcher below it
    (python,) = _children(inner) or [inner]
    spares = _children(python)
    assert len(spares) == 1, "the spare init is the launcher's one child while no command runs"
    os.kill(spares[0], signal.SIGKILL)
    deadline = time.monotonic() + 10
    while not _gone(spares[0]) and time.monotonic() < deadline:
        time.sleep(0.01)
    assert _run("print('after')", ws).output.strip() == "after"
    assert _only_launcher() is live
    # The same when the spare in hand is the dead one (no newer one handed over yet).
    import socket

    dead, peer = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    peer.close()
    before = live.direct
    with monkeypatch.context() as patched:
        patched.setattr(live, "_take_spare", lambda: (10_000, dead))
        assert _run("print('through the launcher')", ws).output.strip() == "through the launcher"
    assert live.direct == before and dead.fileno() == -1  # closed once found dead
    _wait_for_spare(live)
    assert _run("print('direct again')", ws).output.strip() == "direct again"
    assert live.direct == before + 1 and _only_launcher() is live


def test_a_timeout_kills_the_whole_command_and_the_launcher_goes_on(use_launcher: None, tmp_path: Path) -> None:
    ws = _ws(tmp_path)
    token = f"orphan-{time.monotonic_ns()}"
    code = f"""
        import os, subprocess, time
        subprocess.Popen(["sleep", "{token[-6:]}1"], start_new_session=True)
        print("spawned", flush=True)
        time.sleep(60)
    """
    result = _run(code, ws, timeout=3)
    assert result.timed_out and result.returncode is None
    assert "spawned" in result.output
    assert _host_pids_with(f"sleep\0{token[-6:]}1") == []
    assert _run("print('next')", ws).output.strip() == "next"


def test_a_command_holds_no_descriptor_but_its_own(use_launcher: None, tmp_path: Path) -> None:
    """Not the launcher's channel, not the status pipe its result is read from."""
    ws = _ws(tmp_path)
    assert _run("print('warm')", ws).ok
    code = "import os; print(sorted(int(fd) for fd in os.listdir('/proc/self/fd')))"
    result = run_process(
        ["python3", "-c", code], cwd=ws, timeout=60, sandbox=SandboxPolicy(workspace=ws), stdin_text="in"
    )
    assert result.output.strip() == "[0, 1, 2, 3]", result.output  # 3: the listing's own


def test_a_request_too_large_for_the_launcher_runs_the_per_command_way(use_launcher: None, tmp_path: Path) -> None:
    ws = _ws(tmp_path)

    def sh(script: str, big: str = "") -> ProcessResult:
        # One program for every call: a launcher's shape includes the program's own
        # directory when it must be bound back (a venv under /tmp).
        return run_process(
            ["sh", "-c", script],
            cwd=ws,
            timeout=60,
            env={"PATH": os.environ["PATH"], "LANG": "C.UTF-8", "BIG": big},
            sandbox=SandboxPolicy(workspace=ws, env=("BIG",)),
        )

    assert sh("true").ok
    first = _only_launcher()
    first.max_request = 60_000  # as where net.core.wmem_max is small
    for size in (1000, 50_000):  # bytes: the second is too large for that launcher
        big = "é" * (size // 2)  # two bytes each, and no escape needed in the request
        result = sh('echo "${#BIG}"', big)
        assert result.ok and result.output.split() == [str(size)], (size, result.output[-200:])
    assert _only_launcher() is first


def test_a_missing_program_is_an_environment_problem_naming_it(use_launcher: None, tmp_path: Path) -> None:
    ws = _ws(tmp_path)
    assert _run("print('warm')", ws).ok
    _only_launcher()
    with pytest.raises(EnvironmentProblem, match="no-such-program"):
        run_process([str(ws / "no-such-program")], cwd=ws, timeout=30, sandbox=SandboxPolicy(workspace=ws))


def _paths(backend: str) -> list[str]:
    """The ways a command starts under ``backend``: per command, and through the launcher."""
    return ["per-command", "launcher"] if backend == "bwrap" else ["per-command"]


def _choose(path: str, monkeypatch: pytest.MonkeyPatch) -> None:
    launcher.close_all()
    if path == "launcher":
        monkeypatch.setattr(launcher, "FIRST_USE_WAIT", 60.0)
        monkeypatch.setattr(launcher, "START_AFTER", 0)
        monkeypatch.delenv(launcher.SWITCH_ENV, raising=False)
    else:
        monkeypatch.setenv(launcher.SWITCH_ENV, "off")


def test_a_daemonised_child_is_dead_when_the_result_returns(
    backend: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
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
    for path in _paths(backend):
        _choose(path, monkeypatch)
        result = _run(code, ws)
        assert result.ok and "daemonised" in result.output, (path, result.output)
        assert _host_pids_with(f"sleep\0{stamp}") == [], f"{path}: the daemon outlived its command's result"
    launcher.close_all()


def test_nothing_a_command_leaves_in_its_temporary_directories_is_seen_by_the_next(
    backend: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
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
    for path in _paths(backend):
        _choose(path, monkeypatch)
        left = _run(leave, ws)
        assert "LEFT" in left.output, (path, left.output)  # at least its own TMPDIR was writable
        seen = _run(look, ws)
        assert "LOOKED" in seen.output and "FOUND" not in seen.output, (path, left.output, seen.output)
    launcher.close_all()


def test_a_hostile_workspace_and_environment_do_not_change_the_launcher(
    use_launcher: None, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    ws = _ws(tmp_path)
    marker = tmp_path / "payload-ran"
    payload = f"open({str(marker)!r}, 'a').write(__name__ + '\\n')\n"
    for name in ("sitecustomize.py", "usercustomize.py", "os.py", "json.py", "socket.py", "ctypes.py", "startup.py"):
        (ws / name).write_text(payload)
    (ws / "encodings").mkdir()
    (ws / "encodings" / "__init__.py").write_text(payload)
    (ws / "evil.pth").write_text(f"import os; {payload}")
    monkeypatch.chdir(ws)
    monkeypatch.setenv("PYTHONPATH", str(ws))
    monkeypatch.setenv("PYTHONSTARTUP", str(ws / "startup.py"))
    monkeypatch.setenv("PYTHONHOME", str(ws))
    monkeypatch.setenv("PYTHONINSPECT", "1")
    result = run_process(["true"], cwd=ws, timeout=60, sandbox=SandboxPolicy(workspace=ws, env=("PYTHONPATH",)))
    assert result.ok, result.output
    started = _only_launcher()
    assert not marker.exists(), marker.read_text()
    # And the launcher keeps serving commands, whatever they run.
    assert run_process(
        ["echo", "fine"], cwd=ws, timeout=60, sandbox=SandboxPolicy(workspace=ws, env=("PYTHONPATH",))
    ).ok
    assert _only_launcher() is started
    assert not marker.exists()


WRITE_LOCK = """
    try:
        with open("poetry.lock", "a") as fh:
            fh.write("planted\\n")
        print("WROTE")
    except OSError as exc:
        print("REFUSED", exc.errno)
"""


def test_a_protected_file_the_host_replaced_is_still_read_only_for_the_next_command(
    tmp_path: Path, use_launcher: None
) -> None:
    """A mount holds the file it was made on: once the host renames a new file over a
    protected one (a ``git checkout``), a sandbox already running would see the new one
    writable through the workspace. The launcher that made that mount is not used again."""
    ws = _ws(tmp_path)
    (ws / "poetry.lock").write_text("old\n")
    subprocess.run(["git", "init", "-q", str(ws)], check=True)
    subprocess.run(["git", "-C", str(ws), "add", "poetry.lock"], check=True)
    policy = SandboxPolicy(workspace=ws, read_only=("*.lock",))

    def write() -> str:
        code = textwrap.dedent(WRITE_LOCK)
        return run_process([sys.executable, "-c", code], cwd=ws, timeout=60, sandbox=policy).output.strip()

    assert write().startswith("REFUSED")
    first = _only_launcher()
    (ws / "poetry.lock.new").write_text("new\n")
    os.replace(ws / "poetry.lock.new", ws / "poetry.lock")  # as git writes a file: a new inode
    assert write().startswith("REFUSED")
    assert write().startswith("REFUSED")
    assert (ws / "poetry.lock").read_text() == "new\n"
    assert not first.alive() and first not in launcher._LAUNCHERS.values()


def test_a_launcher_still_starting_when_all_are_closed_is_closed_too(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``close_all`` (at exit, between tests) while a launcher is starting in the background:
    it is closed once started, never kept alive nor registered."""
    monkeypatch.setattr(launcher, "START_AFTER", 0)
    monkeypatch.setattr(launcher, "FIRST_USE_WAIT", 0.0)  # the start goes on in the background
    monkeypatch.setenv("SNODO_SANDBOX_BACKEND", "bwrap")
    launcher.close_all()
    gate, finished = threading.Event(), threading.Event()
    start = launcher._start

    def held(*args: object) -> None:
        gate.wait(30)
        try:
            start(*args)  # type: ignore[arg-type]
        finally:
            finished.set()

    monkeypatch.setattr(launcher, "_start", held)
    ws = _ws(tmp_path)
    assert _run("print('per command')", ws).ok  # asks for a launcher: its start waits at the gate
    launcher.close_all()
    gate.set()
    assert finished.wait(60)
    assert launcher._LAUNCHERS == {}
    # its bubblewrap (other tests' launchers may run); bubblewrap's own child dies of its
    # parent-death signal a moment after the parent is killed
    deadline = time.monotonic() + 10
    while _host_pids_with(f"--bind\0{ws}\0") and time.monotonic() < deadline:
        time.sleep(0.05)
    assert _host_pids_with(f"--bind\0{ws}\0") == []
