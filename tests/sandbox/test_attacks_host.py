"""Issue 21's attacks on the host, each made by a real confined child with each backend.

Every test starts the hostile program through ``snodo.process.runner.run_process`` with a policy
(the path every ``run_tests`` call and validator process takes) and then checks the host
side — the listener that must receive nothing, the terminal that must not be typed into,
the file that must not exist — not only what the child said about itself. Names here are
the ones docs/security.md cites for each guarantee.
"""

from __future__ import annotations

import json
import os
import resource
import secrets
import select
import socket
import sys
import textwrap
import threading
import time
import tty
from collections.abc import Iterator
from pathlib import Path

import pytest
from orphans import assert_never_ran, escaping_orphan

from snodo.process.output import LINE_LIMIT
from snodo.process.runner import run_process
from snodo.sandbox import SandboxPolicy
from snodo.sandbox.policy import Limits


def _ws(tmp_path: Path) -> Path:
    ws = tmp_path / "ws"
    ws.mkdir()
    return ws


def _run(ws: Path, code: str, policy: SandboxPolicy | None = None, **kwargs: object) -> str:
    result = run_process(
        [sys.executable, "-c", textwrap.dedent(code)],
        cwd=ws,
        timeout=60,
        sandbox=policy or SandboxPolicy(workspace=ws),
        **kwargs,  # type: ignore[arg-type]
    )
    return result.output


def test_environment_is_an_allowlist(backend: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    ws = _ws(tmp_path)
    leaks = {
        "TMUX": "/tmp/tmux-0/default,4242,0",
        "TMUX_PANE": "%1",
        "SSH_AUTH_SOCK": "/tmp/ssh-x/agent.1",
        "DBUS_SESSION_BUS_ADDRESS": "unix:path=/run/user/0/bus",
        "OPENAI_API_KEY": "sk-leak",
        "GITHUB_TOKEN": "ghp-leak",
        "MY_SECRET_THING": "leak",
        "AWS_SECRET_ACCESS_KEY": "leak",
        "RANDOM_TOOL_SETTING": "leak",
    }
    for name, value in {**leaks, "DATABASE_URL": "postgres://db", "LC_ALL": "C.UTF-8"}.items():
        monkeypatch.setenv(name, value)
    policy = SandboxPolicy(workspace=ws, env=("DATABASE_URL",))
    out = _run(ws, "import json, os; print(json.dumps(dict(os.environ)))", policy, pass_env=("OPENAI_API_KEY",))
    seen = json.loads(out.strip().splitlines()[-1])
    assert not set(seen) & (set(leaks) - {"OPENAI_API_KEY"}), seen
    assert seen["DATABASE_URL"] == "postgres://db"  # named by the protocol (execution.env)
    assert seen["OPENAI_API_KEY"] == "sk-leak"  # named by the plugin (pass_env)
    assert seen["LC_ALL"] == "C.UTF-8" and seen["PATH"] == os.environ["PATH"]
    assert seen["HOME"].startswith(seen["TMPDIR"]) and seen["HOME"] != os.environ.get("HOME")
    # A secret-looking name never passes by the allowlist, only by being named.
    out = _run(ws, "import json, os; print(json.dumps(dict(os.environ)))")
    assert "OPENAI_API_KEY" not in json.loads(out.strip().splitlines()[-1])


class _Listener:
    """A host service: accepts connections and records every byte it receives."""

    def __init__(self, sock: socket.socket, *, datagram: bool = False) -> None:
        self.sock, self.datagram, self.received = sock, datagram, b""
        self.thread = threading.Thread(target=self._serve, daemon=True)
        self.thread.start()

    def _serve(self) -> None:
        self.sock.settimeout(0.2)
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline and not getattr(self, "done", False):
            try:
                if self.datagram:
                    self.received += self.sock.recv(4096)
                    continue
                conn, _ = self.sock.accept()
                conn.settimeout(2)
                self.received += b"CONNECTED:" + conn.recv(4096)
                conn.close()
            except OSError:
                continue

    def close(self) -> bytes:
        self.done = True
        self.thread.join(5)
        self.sock.close()
        return self.received


@pytest.fixture
def unix_listeners(tmp_path: Path) -> Iterator[tuple[str, str, _Listener, _Listener]]:
    """A socket file in the shared /tmp (like ssh-agent's or tmux's) and an abstract one."""
    path = str(tmp_path / "agent.sock")
    abstract = "\0snodo-test-" + secrets.token_hex(6)
    servers = []
    for address in (path, abstract):
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        sock.bind(address)
        sock.listen()
        servers.append(_Listener(sock))
    yield path, abstract, servers[0], servers[1]
    for server in servers:
        server.close()


def test_host_unix_sockets_are_unreachable(
    backend: str, tmp_path: Path, unix_listeners: tuple[str, str, _Listener, _Listener]
) -> None:
    path, abstract, file_server, abstract_server = unix_listeners
    ws = _ws(tmp_path)
    out = _run(
        ws,
        f"""
        import socket
        for label, address in (("file", {path!r}), ("abstract", {abstract!r})):
            try:
                s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
                s.connect(address)
                s.sendall(b"PAYLOAD")
                print(label, "REACHED")
            except OSError as exc:
                print(label, "refused", exc)
        a, b = socket.socketpair()
        a.sendall(b"pair")
        print("socketpair", b.recv(4).decode())
        """,
    )
    time.sleep(0.3)
    assert file_server.close() == b"" and abstract_server.close() == b"", out
    assert "REACHED" not in out and "socketpair pair" in out, out


def test_tiocsti_on_a_host_terminal_fails(backend: str, tmp_path: Path) -> None:
    master, slave = os.openpty()
    try:
        tty.setraw(slave)
        name = os.ttyname(slave)
        ws = _ws(tmp_path)
        out = _run(
            ws,
            f"""
            import fcntl, os, termios
            try:
                fd = os.open({name!r}, os.O_RDWR | os.O_NOCTTY)
                for ch in b"echo PWNED\\n":
                    fcntl.ioctl(fd, termios.TIOCSTI, bytes([ch]))
                print("TYPED")
            except OSError as exc:
                print("refused", exc)
            """,
        )
        readable, _, _ = select.select([slave], [], [], 0.3)
        assert not readable, os.read(slave, 100)  # nothing was typed into the host's terminal
        assert "TYPED" not in out and "refused" in out, out
    finally:
        os.close(master)
        os.close(slave)


def test_network_is_refused_when_off_but_socketpairs_work(backend: str, tmp_path: Path) -> None:
    tcp = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    tcp.bind(("127.0.0.1", 0))
    tcp.listen()
    udp = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    udp.bind(("127.0.0.1", 0))
    tcp_server, udp_server = _Listener(tcp), _Listener(udp, datagram=True)
    ws = _ws(tmp_path)
    out = _run(
        ws,
        f"""
        import socket
        for label, proto in (("tcp", 0), ("mptcp", 262)):
            try:
                s = socket.socket(socket.AF_INET, socket.SOCK_STREAM, proto)
                s.settimeout(3)
                s.connect(("127.0.0.1", {tcp.getsockname()[1]}))
                s.sendall(b"PAYLOAD")
                print(label, "REACHED")
            except OSError as exc:
                print(label, "refused", exc)
        try:
            u = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
            u.sendto(b"PAYLOAD", ("127.0.0.1", {udp.getsockname()[1]}))
            print("udp sent")
        except OSError as exc:
            print("udp refused", exc)
        for family in (socket.AF_PACKET, socket.AF_INET6):
            try:
                socket.socket(family, socket.SOCK_RAW, 0)
                print("raw OPENED", family)
            except OSError as exc:
                print("raw refused", exc)
        a, b = socket.socketpair()
        a.sendall(b"pair")
        print("socketpair", b.recv(4).decode())
        """,
    )
    time.sleep(0.5)
    assert tcp_server.close() == b"" and udp_server.close() == b"", out
    assert "REACHED" not in out and "OPENED" not in out and "socketpair pair" in out, out


def _caps(status: str, field: str) -> int:
    for line in status.splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1], 16)
    raise AssertionError(status)


def test_no_capabilities_and_proc_sys_read_only(backend: str, tmp_path: Path) -> None:
    """As root (this suite's CI runs as root) confined code holds no power over the host."""
    ws = _ws(tmp_path)
    out = _run(
        ws,
        """
        print(open("/proc/self/status").read())
        for knob in ("/proc/sys/vm/swappiness", "/proc/sys/kernel/hostname"):
            try:
                with open(knob, "r+") as fh:
                    fh.write(fh.read())  # the same value: harmless if it ever got through
                print("WROTE", knob)
            except OSError as exc:
                print("refused", knob, exc)
        """,
    )
    assert _caps(out, "CapEff") == 0 and _caps(out, "CapPrm") == 0 and _caps(out, "CapAmb") == 0, out
    if os.getuid() == 0:  # root's exec-time grant is gone too
        assert _caps(out, "CapBnd") == 0, out
    assert "NoNewPrivs:\t1" in out
    assert "WROTE" not in out and out.count("refused") == 2, out


def test_no_file_is_left_in_the_host_dev_shm(backend: str, tmp_path: Path) -> None:
    name = f"snodo-attack-{secrets.token_hex(6)}"
    ws = _ws(tmp_path)
    out = _run(
        ws,
        f"""
        try:
            open("/dev/shm/{name}", "w").write("payload")
            print("written (a private /dev/shm)")
        except OSError as exc:
            print("refused", exc)
        """,
    )
    assert not Path("/dev/shm", name).exists(), out


def test_no_process_outlives_the_run(backend: str, tmp_path: Path) -> None:
    """Double fork, new session, environment cleared: the payload still never runs."""
    code, landed, token = escaping_orphan(_ws(tmp_path))
    out = _run(landed.parent, code)
    assert "parent done" in out
    assert_never_ran(landed, token)


def test_a_huge_line_without_newline_is_bounded(backend: str, tmp_path: Path) -> None:
    ws = _ws(tmp_path)
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    lines: list[str] = []
    result = run_process(
        [
            sys.executable,
            "-c",
            "import sys\nw = sys.stdout.buffer.write\nw(b'HEAD')\nfor _ in range(150): w(b'x' * (1 << 20))\nw(b'TAIL')",
        ],
        cwd=ws,
        timeout=120,
        sandbox=SandboxPolicy(workspace=ws),
        on_line=lines.append,
    )
    grown_mb = (resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before) / 1024
    assert result.returncode == 0
    assert len(result.output) < 2_100_000, len(result.output)
    assert result.output.startswith("HEAD") and result.output.endswith("TAIL")
    assert "snodo cut" in result.output
    assert len(lines) == 1 and len(lines[0]) < LINE_LIMIT + 100 and "snodo cut" in lines[0]
    assert grown_mb < 64, f"the server grew by {grown_mb:.0f} MB reading one 150 MB line"


def test_limits_stop_a_huge_file_and_a_memory_hog(backend: str, tmp_path: Path) -> None:
    ws = _ws(tmp_path)
    policy = SandboxPolicy(workspace=ws, limits=Limits(file_size=1 << 20, processes=0, memory=512 << 20))
    out = _run(
        ws,
        """
        try:
            with open("big.bin", "wb") as fh:
                for _ in range(8):
                    fh.write(b"x" * (1 << 20))
                    fh.flush()
            print("huge file WRITTEN")
        except OSError as exc:
            print("huge file refused", exc)
        try:
            hog = bytearray(2 << 30)
            print("memory hog GOT IT")
        except MemoryError:
            print("memory hog refused")
        """,
        policy,
    )
    assert (ws / "big.bin").stat().st_size <= 1 << 20
    assert "huge file refused" in out and "memory hog refused" in out, out


def test_limits_stop_a_fork_bomb(backend: str, tmp_path: Path) -> None:
    """As root the kernel ignores RLIMIT_NPROC: the run's pids cgroup limits it instead."""
    from snodo.sandbox import cgroup

    if os.getuid() == 0 and not cgroup.available():
        pytest.skip("root without a cgroup v1 pids hierarchy: not guaranteed, and `snodo doctor` says so")
    ws = _ws(tmp_path)
    mine = 0 if os.getuid() == 0 else len([p for p in os.listdir("/proc") if p.isdigit()])
    policy = SandboxPolicy(workspace=ws, limits=Limits(processes=mine + 32))
    out = _run(
        ws,
        """
        import os, time
        started = 0
        for _ in range(400):
            try:
                if os.fork() == 0:
                    time.sleep(30)
                    os._exit(0)
                started += 1
            except OSError:
                break
        print("started", started)
        """,
        policy,
    )
    assert int(out.split("started")[1].split()[0]) <= 32, out


def test_the_missing_process_count_limit_is_reported(backend: str) -> None:
    from snodo.sandbox import cgroup
    from snodo.sandbox.choose import missing

    gaps = missing(backend)
    assert any("process count" in gap for gap in gaps) == (os.getuid() == 0 and not cgroup.available()), gaps


def test_interpreter_environments_are_read_only(backend: str, tmp_path: Path) -> None:
    """A ``.pth`` planted in the checkout's venv would run in the user's next ``python``."""
    ws = _ws(tmp_path)
    for venv in (".venv", "tools-env"):
        site = ws / venv / "lib" / "python3" / "site-packages"
        site.mkdir(parents=True)
        (ws / venv / "pyvenv.cfg").write_text("home = /usr/bin\n")
        (ws / venv / "bin").mkdir()
        (ws / venv / "bin" / "python").write_text("#!/bin/sh\n")
    (ws / "src").mkdir()
    policy = SandboxPolicy(workspace=ws, interpreters=(ws / "tools-env",))
    out = _run(
        ws,
        """
        for target in (".venv/lib/python3/site-packages/evil.pth", "tools-env/lib/python3/site-packages/evil.pth",
                       ".venv/bin/python", "src/ok.py"):
            try:
                open(target, "w").write("import os; os.system('payload')\\n")
                print("WROTE", target)
            except OSError as exc:
                print("refused", target, type(exc).__name__)
        """,
        policy,
    )
    assert not list(ws.glob("*/lib/python3/site-packages/evil.pth")), out
    assert (ws / ".venv" / "bin" / "python").read_text() == "#!/bin/sh\n"
    assert out.count("refused") == 3 and "WROTE src/ok.py" in out, out  # the rest of the workspace stays writable


def test_only_the_harmless_devices_can_be_opened(backend: str, tmp_path: Path) -> None:
    """A disk or the kernel log opened raw would go past every path rule (uid 0 owns them even
    without capabilities); confined code gets what bubblewrap's fresh /dev holds, no more."""
    ws = _ws(tmp_path)
    candidates = [
        str(p)
        for p in sorted(Path("/dev").iterdir())
        if p.name in {"kmsg", "mem", "vda", "sda", "nvme0n1", "loop0", "tty1", "console", "kvm"}
    ]
    out = _run(
        ws,
        f"""
        import os
        for device in {candidates!r}:
            try:
                os.close(os.open(device, os.O_RDONLY | os.O_NONBLOCK))
                print("OPENED", device)
            except OSError as exc:
                print("refused", device, exc.errno)
        with open("/dev/urandom", "rb") as fh:
            print("urandom", len(fh.read(8)))
        with open("/dev/null", "w") as fh:
            fh.write("x")
        print("null ok")
        """,
    )
    assert "OPENED" not in out, out
    assert "urandom 8" in out and "null ok" in out, out
