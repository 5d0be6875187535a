"""What a confined child can and cannot do, with each backend, through ``snodo.process.runner.run_process``.

Real children, real files: each attempt a hostile test suite would make is made, and the
test checks the filesystem (and the process table) afterwards, not only what the child said.
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import textwrap
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from snodo import api
from snodo.process.runner import run_process, terminate_all
from snodo.sandbox import SandboxPolicy, confined, current_policy
from snodo.sandbox.policy import configured_home


def _project(root: Path) -> Path:
    (root / ".snodo").mkdir(parents=True)
    (root / ".snodo" / "protocol.yml").write_text("protocol\n")
    # A real work tree: protected paths are found through git's index (sandbox/layout.py).
    subprocess.run(["git", "init", "-q", str(root)], check=True)
    (root / ".git" / "config").write_text("[core]\n\trepositoryformatversion = 0\n")
    (root / "src").mkdir()
    (root / "src" / "mod.py").write_text("X = 1\n")
    (root / "secrets").mkdir()
    (root / "secrets" / "prod.key").write_text("secret\n")
    (root / "tests").mkdir()
    return root


def _try_all(script_lines: dict[str, str]) -> str:
    """A Python program that attempts each action and prints ``label: OK|DENIED``."""
    body = ["import os, sys, socket"]
    for label, code in script_lines.items():
        body.append(
            f"try:\n    {code}\n    print({label!r} + ': OK', flush=True)\n"
            f"except Exception as exc:\n    print({label!r} + ': DENIED ' + type(exc).__name__, flush=True)"
        )
    return "\n".join(body)


def _outcomes(output: str) -> dict[str, str]:
    found = {}
    for line in output.splitlines():
        label, sep, verdict = line.partition(": ")
        if sep:
            found[label] = verdict.split()[0]
    return found


def test_writes_reach_the_workspace_and_nothing_else(backend: str, tmp_path: Path) -> None:
    ws = _project(tmp_path / "ws")
    outside = tmp_path / "outside"
    outside.mkdir()
    home = configured_home()
    (home / "keys").mkdir(parents=True, exist_ok=True)
    (home / "keys" / "decision.key").write_text("PRIVATE\n")
    policy = SandboxPolicy(workspace=ws, read_only=("secrets",))
    script = _try_all(
        {
            "edit source": "open('src/mod.py', 'a').write('Y = 2\\n')",
            "new file in a directory": "open('tests/test_new.py', 'w').write('')",
            "temporary file": "open(os.path.join(os.environ['TMPDIR'], 't'), 'w').write('x')",
            "protocol": "open('.snodo/protocol.yml', 'w').write('hacked')",
            "new governance file": "open('.snodo/decisions.json', 'w').write('{}')",
            "git hook": "open('.git/hooks-pre-commit', 'w').write('#!/bin/sh')",
            "git config": "open('.git/config', 'a').write('[alias]')",
            "protected path": "open('secrets/prod.key', 'w').write('x')",
            "outside": f"open({str(outside / 'x')!r}, 'w').write('x')",
            "parent": "open('../escape', 'w').write('x')",
            "system tmp": "open('/tmp/snodo-sandbox-escape-test', 'w').write('x')",
            "read keys": f"open({str(home / 'keys' / 'decision.key')!r}).read()",
            "list home": f"assert 'keys' in os.listdir({str(home)!r})",
            "read source": "open('src/mod.py').read()",
            "read system": "open('/etc/hostname').read() if os.path.exists('/etc/hostname') else None",
        }
    )
    result = run_process([sys.executable, "-c", script], cwd=ws, timeout=60, sandbox=policy)
    seen = _outcomes(result.output)
    assert seen == {
        "edit source": "OK",
        "new file in a directory": "OK",
        "temporary file": "OK",
        "protocol": "DENIED",
        "new governance file": "DENIED",
        "git hook": "DENIED",
        "git config": "DENIED",
        "protected path": "DENIED",
        "outside": "DENIED",
        "parent": "DENIED",
        "system tmp": "DENIED",
        "read keys": "DENIED",
        "list home": "DENIED",
        "read source": "OK",
        "read system": "OK",
    }, result.output
    # The filesystem agrees with what the child said.
    assert (ws / ".snodo" / "protocol.yml").read_text() == "protocol\n"
    assert sorted(p.name for p in (ws / ".snodo").iterdir()) == ["protocol.yml"]
    assert (ws / ".git" / "config").read_text() == "[core]\n\trepositoryformatversion = 0\n"
    assert (ws / "secrets" / "prod.key").read_text() == "secret\n"
    assert list(outside.iterdir()) == [] and not (tmp_path / "escape").exists()
    assert not Path("/tmp/snodo-sandbox-escape-test").exists()
    assert (ws / "src" / "mod.py").read_text() == "X = 1\nY = 2\n"


def test_a_workspace_below_the_hidden_home_is_visible_and_writable(backend: str, tmp_path: Path) -> None:
    """Task worktrees live under $SNODO_HOME: the workspace is reachable, the rest of the home is not."""
    home = configured_home()
    ws = _project(home / "worktrees" / "key" / "run-1")
    (home / "keys").mkdir(exist_ok=True)
    (home / "keys" / "token.key").write_text("PRIVATE\n")
    (home / "tokens.db").write_text("db")
    policy = SandboxPolicy(workspace=ws)
    script = _try_all(
        {
            "edit": "open('src/mod.py', 'w').write('X = 3\\n')",
            "keys": f"open({str(home / 'keys' / 'token.key')!r}).read()",
            "tokens": f"open({str(home / 'tokens.db')!r}, 'a').write('x')",
            "sibling run": f"os.makedirs({str(home / 'worktrees' / 'key' / 'run-2')!r})",
        }
    )
    result = run_process([sys.executable, "-c", script], cwd=ws, timeout=60, sandbox=policy)
    assert _outcomes(result.output) == {"edit": "OK", "keys": "DENIED", "tokens": "DENIED", "sibling run": "DENIED"}
    assert (ws / "src" / "mod.py").read_text() == "X = 3\n"
    assert (home / "tokens.db").read_text() == "db"
    assert not (home / "worktrees" / "key" / "run-2").exists()


def test_pwd_is_the_working_directory_and_the_private_tmpdir_is_removed(backend: str, tmp_path: Path) -> None:
    ws = _project(tmp_path / "ws")
    sub = ws / "src"
    code = "import os, tempfile; print(os.environ['PWD']); print(os.getcwd()); print(tempfile.gettempdir())"
    result = run_process(
        [sys.executable, "-c", code],
        cwd=sub,
        timeout=60,
        env={"PATH": os.environ["PATH"], "PWD": "/elsewhere"},
        sandbox=SandboxPolicy(workspace=ws),
    )
    pwd, cwd, tmp = result.output.split()
    assert pwd == cwd == str(sub)
    # Removed off the run's way, by a background thread (snodo/sandbox/environ.py): soon.
    deadline = time.monotonic() + 10
    while Path(tmp).exists() and time.monotonic() < deadline:
        time.sleep(0.01)
    assert not Path(tmp).exists()
    # Unconfined runs get the same PWD.
    plain = run_process([sys.executable, "-c", "import os; print(os.environ['PWD'])"], cwd=sub, timeout=30)
    assert plain.output.strip() == str(sub)


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state != "Z"


@pytest.mark.slow
def test_a_process_ignoring_sigterm_is_killed_at_the_time_limit(backend: str, tmp_path: Path) -> None:
    ws = _project(tmp_path / "ws")
    code = textwrap.dedent(
        """
        import os, signal, time
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
        open('tests/pid', 'w').write(str(os.getpid()))
        print('started', flush=True)
        while True:
            time.sleep(0.1)
        """
    )
    started = time.monotonic()
    result = run_process([sys.executable, "-c", code], cwd=ws, timeout=3, sandbox=SandboxPolicy(workspace=ws))
    assert result.timed_out and result.returncode is None
    assert time.monotonic() - started < 15
    assert "started" in result.output
    # Under bubblewrap the pid is the sandbox's own; find the process by its command line.
    time.sleep(0.2)
    assert not _running_with(code)


def _running_with(marker: str) -> list[int]:
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or int(entry.name) == os.getpid():
            continue
        try:
            cmdline = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
        except OSError:
            continue
        if marker.strip().splitlines()[-1].strip() in cmdline and _alive(int(entry.name)):
            found.append(int(entry.name))
    return found


DAEMON = textwrap.dedent(
    """
    import os, sys, time
    # daemonise: fork, new session, fork again; the grandchild outlives its parents
    if os.fork() == 0:
        os.setsid()
        if os.fork() == 0:
            time.sleep(1.5)
            open('tests/daemon-wrote', 'w').write('still running after the verdict')
            time.sleep(60)  # DAEMON-MARKER-%s
        os._exit(0)
    print('leader done', flush=True)
    """
)


@pytest.mark.slow
def test_a_daemonised_grandchild_does_not_outlive_the_run(backend: str, tmp_path: Path) -> None:
    ws = _project(tmp_path / "ws")
    code = DAEMON % backend
    result = run_process([sys.executable, "-c", code], cwd=ws, timeout=30, sandbox=SandboxPolicy(workspace=ws))
    assert result.returncode == 0 and "leader done" in result.output
    time.sleep(2.5)  # longer than the daemon waits before writing
    assert not (ws / "tests" / "daemon-wrote").exists()
    assert not _running_with(f"DAEMON-MARKER-{backend}")


def _listener() -> tuple[socket.socket, list[bytes]]:
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(5)
    server.settimeout(10)
    received: list[bytes] = []

    def serve() -> None:
        try:
            conn, _ = server.accept()
            received.append(conn.recv(100))
            conn.close()
        except OSError:
            pass

    threading.Thread(target=serve, daemon=True).start()
    return server, received


@pytest.mark.parametrize("network", [False, True])
def test_network_only_when_declared(backend: str, tmp_path: Path, network: bool) -> None:
    ws = _project(tmp_path / "ws")
    server, received = _listener()
    port = server.getsockname()[1]
    code = (
        "import socket\n"
        "try:\n"
        f"    s = socket.create_connection(('127.0.0.1', {port}), timeout=5); s.sendall(b'hello'); s.close()\n"
        "    print('connected')\n"
        "except OSError as exc:\n"
        "    print('refused', exc)\n"
    )
    policy = SandboxPolicy(workspace=ws, network=network)
    result = run_process([sys.executable, "-c", code], cwd=ws, timeout=30, sandbox=policy)
    time.sleep(0.2)
    server.close()
    if network:
        assert result.output.startswith("connected"), result.output
        assert received == [b"hello"]
    else:
        assert result.output.startswith("refused"), result.output
        assert received == []


def test_plugins_calling_the_public_api_are_confined_by_the_current_policy(backend: str, tmp_path: Path) -> None:
    ws = _project(tmp_path / "ws")
    write = [sys.executable, "-c", "open('.snodo/protocol.yml', 'w').write('hacked')"]
    assert current_policy() is None
    with confined(SandboxPolicy(workspace=ws)):
        denied = api.run_process(write, cwd=ws, timeout=30)
    assert denied.returncode != 0 and (ws / ".snodo" / "protocol.yml").read_text() == "protocol\n"
    assert current_policy() is None
    # Context variables do not cross into threads by themselves; the runner copies them.
    results: list[int | None] = []
    with confined(SandboxPolicy(workspace=ws)):
        import contextvars

        ctx = contextvars.copy_context()
        t = threading.Thread(
            target=ctx.run, args=(lambda: results.append(api.run_process(write, cwd=ws, timeout=30).returncode),)
        )
        t.start()
        t.join()
    assert results and results[0] != 0
    assert (ws / ".snodo" / "protocol.yml").read_text() == "protocol\n"


@pytest.mark.slow
def test_terminate_all_kills_live_confined_trees(backend: str, tmp_path: Path) -> None:
    ws = _project(tmp_path / "ws")
    code = "import time, os\nif os.fork() == 0:\n    time.sleep(60)  # TERMINATE-ALL-MARKER\ntime.sleep(60)\n"
    outcome: list[object] = []

    def run() -> None:
        outcome.append(
            run_process([sys.executable, "-c", code], cwd=ws, timeout=60, sandbox=SandboxPolicy(workspace=ws))
        )

    t = threading.Thread(target=run)
    t.start()
    deadline = time.monotonic() + 20
    while not _running_with("TERMINATE-ALL-MARKER") and time.monotonic() < deadline:
        time.sleep(0.05)
    assert _running_with("TERMINATE-ALL-MARKER")
    assert terminate_all() >= 1
    t.join(20)
    assert not t.is_alive() and outcome
    assert not _running_with("TERMINATE-ALL-MARKER")


def test_terminate_all_waits_for_a_child_being_started(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A child that runs but whose start has not returned yet (here held there on purpose)
    is still killed: terminate_all waits for the starts under way."""
    import subprocess

    started, release = threading.Event(), threading.Event()

    class SlowPopen(subprocess.Popen[bytes]):
        def __init__(self, *args: Any, **kwargs: Any) -> None:
            super().__init__(*args, **kwargs)  # the child runs from here on
            started.set()
            release.wait(20)  # the moment between the start and its bookkeeping, made long

    monkeypatch.setattr(subprocess, "Popen", SlowPopen)
    outcome: list[object] = []
    runner = threading.Thread(
        target=lambda: outcome.append(run_process(["sleep", "60"], cwd=tmp_path, timeout=60)), daemon=True
    )
    runner.start()
    assert started.wait(20)
    killed: list[int] = []
    killer = threading.Thread(target=lambda: killed.append(terminate_all()))
    killer.start()
    time.sleep(0.3)
    assert not killed, "terminate_all went ahead while a start was under way"
    release.set()
    killer.join(20)
    runner.join(20)
    assert killed == [1]
    assert not runner.is_alive() and outcome


def test_an_extra_writable_directory_is_writable_and_nothing_beside_it(backend: str, tmp_path: Path) -> None:
    """A plugin's per-run state directory (``snodo.api.run_process(writable=...)``) is writable
    in the sandbox; its siblings stay read-only; a directory in the hidden home is refused."""
    from snodo import api
    from snodo.base.errors import EnvironmentProblem

    ws = _project(tmp_path / "ws")
    state = tmp_path / "state"
    state.mkdir()
    sibling = tmp_path / "sibling"
    sibling.mkdir()
    script = _try_all(
        {
            "state": f"open({str(state / 'db')!r}, 'w').write('x')",
            "sibling": f"open({str(sibling / 'x')!r}, 'w').write('x')",
        }
    )
    with confined(SandboxPolicy(workspace=ws)):
        r = api.run_process([sys.executable, "-c", script], cwd=ws, timeout=60, writable=(state,))
    assert _outcomes(r.output) == {"state": "OK", "sibling": "DENIED"}, r.output
    assert (state / "db").read_text() == "x" and not (sibling / "x").exists()
    inside_home = configured_home() / "plugin-state"
    inside_home.mkdir(parents=True, exist_ok=True)
    with confined(SandboxPolicy(workspace=ws)), pytest.raises(EnvironmentProblem, match="overlaps a hidden path"):
        api.run_process([sys.executable, "-c", "pass"], cwd=ws, timeout=60, writable=(inside_home,))
