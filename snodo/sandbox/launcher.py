"""A long-lived confined launcher per sandbox shape, so a confined command costs a request
and a fork/exec instead of a whole bubblewrap start (issue 26, item 3).

The *shape* is everything that makes the bubblewrap command line but the command, its
working directory and environment: the policy's mounts (hidden, protected and read-only
paths), network on or off, the resource limits, the program's directory where it is hidden,
the bubblewrap program. One launcher runs per shape in use (at most :data:`MAX_LAUNCHERS`,
the least recently used idle one retired first): bubblewrap with the very namespaces and
mounts of a per-command start, running ``python -I -S -c`` :mod:`.launcher_main` — the
standard library only, never anything of the workspace. Each command then gets its own PID
and mount namespaces inside it: its own ``/proc``, an empty private ``TMPDIR``/``HOME`` and
``/dev/shm``, its limits, no capability, ``no_new_privs``, a new session (docs/security.md
says what is shared between the commands of one launcher: the workspace, as always, and the
launcher's IPC and UTS namespaces).

The fourth command of a shape starts the launcher in the background and, like the first three,
runs the per-command way, so a short run pays nothing for it; later ones use it. A
launcher that cannot start leaves its shape on the per-command path; one that dies makes the
calls it was serving fail with a named error (never a verdict), and the next call starts a
new one. All are closed at exit; each one dies with snodo (``--die-with-parent``).
"""

from __future__ import annotations

import array
import atexit
import contextlib
import functools
import itertools
import json
import os
import queue
import select
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import IO

from snodo.errors import EnvironmentProblem
from snodo.sandbox.base import Prepared, become_subreaper
from snodo.sandbox.cgroup import PidGroup, pid_group, release
from snodo.sandbox.environ import confined_environment, discard_private_dir, make_private_dir
from snodo.sandbox.limits import limit_values
from snodo.sandbox.policy import SandboxPolicy, resolved

#: ``SNODO_SANDBOX_LAUNCHER=off``: every command starts its own bubblewrap (as before).
SWITCH_ENV = "SNODO_SANDBOX_LAUNCHER"
MAX_LAUNCHERS = 4
#: Seconds a launcher may take to say it is ready.
START_TIMEOUT = 20.0
#: Seconds :meth:`Launcher.close` gives a launcher to end its commands and exit by itself.
CLOSE_WAIT = 2.0
#: Commands of one shape that start the per-command way before its launcher is started (in
#: the background, while the next one still runs the per-command way): a launcher costs
#: about as much CPU as three or four bubblewrap starts, which a short ``snodo run`` (three
#: confined commands) never repays.
START_AFTER = 3
#: Seconds the command that starts a launcher waits for it (0: run the per-command way
#: while it starts in the background). Tests raise it, and set ``START_AFTER`` to 0, to
#: always exercise the launcher.
FIRST_USE_WAIT = 0.0
_SOCKET_BUFFER = 4 << 20
_SOURCE: list[str] = []
_IDS = itertools.count(1)


def _source() -> str:
    if not _SOURCE:
        _SOURCE.append(Path(__file__).with_name("launcher_main.py").read_text(encoding="utf-8"))
    return _SOURCE[0]


class Launched:
    """One command started by a launcher, with the part of ``Popen``'s interface
    :mod:`snodo.proc` uses. Its exit is reported on :attr:`exit_fd` (the status pipe):
    ``<code>\\n<why it could not start>``; end of file with nothing said means the launcher
    ended (or, after :meth:`kill`, that the command was killed)."""

    def __init__(self, launcher: Launcher, ident: int, status: int, stdout: int, stdin: int | None) -> None:
        self.launcher = launcher
        self.ident = ident
        self.pid = -ident  # never a real process: only a key for snodo's bookkeeping
        self.exit_fd = status
        self.stdout: IO[bytes] | None = open(stdout, "rb", buffering=0)  # noqa: SIM115
        self.stdin: IO[bytes] | None = open(stdin, "wb") if stdin is not None else None  # noqa: SIM115
        self.returncode: int | None = None
        self.failure = ""  # why the command could not start (exit status 127)
        self.lost = False  # the launcher ended without a word about this command
        self.killed = False

    def poll(self) -> int | None:
        if self.returncode is None and _readable(self.exit_fd, 0):
            self._read_status()
        return self.returncode

    def wait(self, timeout: float | None = None) -> int:
        deadline = None if timeout is None else time.monotonic() + timeout
        while self.poll() is None:
            left = None if deadline is None else deadline - time.monotonic()
            if left is not None and left <= 0:
                raise subprocess.TimeoutExpired("(launched)", timeout or 0)
            ready = _readable(self.exit_fd, 5.0 if left is None else min(left, 5.0))
            if not ready and self.killed:  # asked to kill, and nothing after 5 s: end it all
                self.launcher.close(orderly=False)
        assert self.returncode is not None
        return self.returncode

    def _read_status(self) -> None:
        try:
            said = os.read(self.exit_fd, 8192).decode("utf-8", "replace")
        except OSError:
            said = ""
        code, _, why = said.partition("\n")
        if code.strip().lstrip("-").isdigit():
            self.returncode = int(code)
            self.failure = why.strip() if self.returncode == 127 else ""
        else:  # end of file or garbage: the command's init is gone without a report
            self.returncode = -signal.SIGKILL
            self.lost = not self.killed
            if self.lost:
                self.launcher.broken = True
        self.launcher.finished(self)

    def close(self) -> None:
        """Once snodo is done with the command: its status descriptor is closed."""
        if self.exit_fd >= 0:
            os.close(self.exit_fd)
            self.exit_fd = -1

    def kill(self) -> None:
        """SIGKILL the command's whole PID namespace (through the launcher)."""
        if self.returncode is not None or self.killed:
            return
        self.killed = True
        if not self.launcher.send(json.dumps({"op": "kill", "id": self.ident}).encode(), ()):
            self.launcher.close(orderly=False)


def _receive(channel: socket.socket) -> tuple[bytes, list[int]]:
    """One message from the launcher, without waiting (``BlockingIOError`` if none), and the
    descriptors it carries, close-on-exec (``socket.recv_fds`` drops its flags before 3.12)."""
    message, ancillary, _flags, _addr = channel.recvmsg(
        256, socket.CMSG_SPACE(4), socket.MSG_DONTWAIT | socket.MSG_CMSG_CLOEXEC
    )
    fds = array.array("i")
    for level, kind, data in ancillary:
        if level == socket.SOL_SOCKET and kind == socket.SCM_RIGHTS:
            fds.frombytes(data[: len(data) - len(data) % fds.itemsize])
    return message, list(fds)


def _readable(fd: int, seconds: float) -> bool:
    poller = select.poll()
    poller.register(fd, select.POLLIN)
    return bool(poller.poll(max(0, int(seconds * 1000))))


class Launcher:
    """One bubblewrap sandbox that starts confined commands on request."""

    def __init__(self, program: str, opts: Sequence[str], tmpdir: Path, max_pids: int) -> None:
        from snodo.sandbox.bwrap import mounted_identity

        self.mounted = mounted_identity(opts)  # before bubblewrap mounts them (see mounted_identity)
        self.tmpdir = tmpdir
        self.lock = threading.Lock()
        self.active: dict[int, Launched] = {}
        self.broken = False
        self.used = time.monotonic()
        #: The spare init the launcher handed over (its number and request socket), if any.
        self._spare: tuple[int, socket.socket] | None = None
        self.direct = 0  # commands sent straight to a spare init (tests and benchmarks count them)
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        for sock in (ours, theirs):
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, _SOCKET_BUFFER)
        self.channel = ours
        config = json.dumps({"tmpdir": str(tmpdir)})
        argv = [
            program,
            *opts,
            *(() if "--unshare-user" in opts else ("--unshare-user",)),
            "--cap-add",
            "CAP_SYS_ADMIN",
            "--cap-add",
            "CAP_SETPCAP",
            "--chdir",
            "/",
            "--",
            sys.executable,
            "-I",
            "-S",
            "-c",
            _source(),
            str(theirs.fileno()),
            config,
        ]
        # bubblewrap's init outlives its monitor: adopted by snodo, reaped by snodo (with the
        # CPU time of every command the launcher ran), not left to the system's init.
        become_subreaper()
        self.group: PidGroup | None = pid_group(max_pids)
        spawning = self.group.spawning if self.group is not None else contextlib.nullcontext
        try:
            with spawning():
                # Not through run_process: it is the confinement itself (bubblewrap with the
                # policy's options), snodo's own stdlib-only code; its start is bounded by
                # START_TIMEOUT, each command it starts by run_process's time limit.
                self.proc = subprocess.Popen(
                    argv,
                    env={},
                    cwd="/",
                    stdin=subprocess.DEVNULL,
                    stdout=subprocess.DEVNULL,
                    stderr=subprocess.PIPE,
                    pass_fds=(theirs.fileno(),),
                    start_new_session=True,
                )
        finally:
            theirs.close()
        ours.settimeout(START_TIMEOUT)
        try:
            ready = json.loads(ours.recv(256) or b"{}")
        except (OSError, ValueError):
            ready = {}
        ours.settimeout(None)
        #: The largest request (encoded) this launcher can take; larger ones go the per-command way.
        self.max_request = min(
            int(ready.get("max_request", 0)), ours.getsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF) // 2
        )
        if ready.get("ready") is not True:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(self.proc.pid, signal.SIGKILL)
            last = self.last_words() or "no answer"
            self.close()
            raise EnvironmentProblem(f"the sandbox launcher did not start ({last})")

    def last_words(self) -> str:
        """The last line the launcher wrote (it writes only when it fails), once it ended."""
        with contextlib.suppress(subprocess.TimeoutExpired):
            self.proc.wait(timeout=5)
        if self.proc.poll() is None or self.proc.stderr is None or self.proc.stderr.closed:
            return ""
        with contextlib.suppress(OSError, ValueError):
            said = self.proc.stderr.read(65536).decode("utf-8", "replace").strip()
            return said.splitlines()[-1] if said else ""
        return ""

    def alive(self) -> bool:
        return not self.broken and self.proc.poll() is None

    def send(self, payload: bytes, fds: Sequence[int]) -> bool:
        try:
            with self.lock:
                socket.send_fds(self.channel, [payload], list(fds))
            return True
        except OSError:
            self.broken = True
            return False

    def _take_spare(self) -> tuple[int, socket.socket] | None:
        """Under :attr:`lock`: the spare init the launcher handed over (it hands one at a
        time, once the last was used and no command runs), or ``None``."""
        while True:
            try:
                message, fds = _receive(self.channel)
            except (BlockingIOError, InterruptedError):
                break
            except OSError:
                self.broken = True
                break
            if not message and not fds:  # the launcher ended
                self.broken = True
                break
            try:
                number = int(json.loads(message)["spare"])
            except (ValueError, KeyError, TypeError):
                number = -1
            if number < 0 or len(fds) != 1:
                for fd in fds:
                    os.close(fd)
                continue
            try:
                sock = socket.socket(fileno=fds[0])
            except OSError:  # not a socket at all
                os.close(fds[0])
                continue
            if sock.family != socket.AF_UNIX or sock.type != socket.SOCK_SEQPACKET:
                sock.close()
                continue
            if self._spare is not None:
                self._spare[1].close()
            self._spare = (number, sock)
        spare, self._spare = self._spare, None
        return spare

    def request(
        self, argv: Sequence[str], *, cwd: Path, env: Mapping[str, str], limits: Sequence[tuple[int, int]]
    ) -> tuple[int, bytes] | None:
        """The request to start ``argv`` (its id and bytes), or ``None`` when it is too large
        for this launcher's socket (the per-command way then)."""
        ident = next(_IDS)
        request = {"op": "run", "id": ident, "argv": list(argv), "cwd": str(cwd), "env": dict(env), "limits": limits}
        payload = json.dumps(request, ensure_ascii=False).encode()
        return (ident, payload) if len(payload) <= self.max_request else None

    def spawn(self, request: tuple[int, bytes], program: str, stdin: bool) -> Launched:
        """Start a command (:meth:`request`) confined; :class:`EnvironmentProblem` if the
        launcher is gone."""
        ident, payload = request
        status_r, status_w = os.pipe2(os.O_CLOEXEC)
        out_r, out_w = os.pipe2(os.O_CLOEXEC)
        in_r, in_w = os.pipe2(os.O_CLOEXEC) if stdin else (os.open(os.devnull, os.O_RDONLY | os.O_CLOEXEC), None)
        launched = Launched(self, ident, status_r, out_r, in_w)
        with self.lock:
            self.active[ident] = launched
            self.used = time.monotonic()
            spare = self._take_spare()
        try:
            sent = spare is not None and self._send_to(spare, ident, payload, (in_r, out_w, status_w))
            if not sent:  # no spare (or it is gone): the launcher makes an init for it
                sent = self.send(payload, (in_r, out_w, status_w))
        finally:
            for fd in (in_r, out_w, status_w):
                os.close(fd)
        if not sent:
            self.finished(launched)
            for stream in (launched.stdout, launched.stdin):
                if stream is not None:
                    stream.close()
            os.close(status_r)
            raise EnvironmentProblem(f"cannot run {program!r} confined by bwrap: the sandbox launcher has ended")
        return launched

    def _send_to(self, spare: tuple[int, socket.socket], ident: int, payload: bytes, fds: Sequence[int]) -> bool:
        """Send the request straight to the spare init; then tell the launcher which request
        it took, with the status descriptor it holds until that init is gone. ``False`` if
        the spare was gone (nothing started)."""
        number, sock = spare
        try:
            socket.send_fds(sock, [payload], list(fds), socket.MSG_NOSIGNAL)
        except OSError:
            return False
        finally:
            sock.close()
        self.direct += 1
        # If this fails the launcher is gone, and its sandbox with the command: the status
        # pipe then ends without a word, as for any command of a launcher that died.
        self.send(json.dumps({"op": "used", "spare": number, "id": ident}).encode(), fds[2:])
        return True

    def finished(self, launched: Launched) -> None:
        with self.lock:
            self.active.pop(launched.ident, None)
            self.used = time.monotonic()

    def busy(self) -> bool:
        with self.lock:
            return bool(self.active)

    def shut(self) -> None:
        """Tell the launcher to end: its channel closed, it kills each command's init, reaps
        them and exits (:meth:`close` then waits for it)."""
        self.broken = True
        with self.lock:
            spare, self._spare = self._spare, None
        if spare is not None:
            spare[1].close()
        with contextlib.suppress(OSError):
            self.channel.close()

    def close(self, orderly: bool = True) -> None:
        """End the launcher and every command it runs (its sandbox dies with it).

        ``orderly``: it is given :data:`CLOSE_WAIT` to reap its inits and exit, so the CPU
        time of each command is in snodo's children's time (killed first, an init that had
        just ended could be lost with the launcher's namespace before it was reaped); then,
        or at once when not ``orderly`` (a launcher that stopped answering), its whole
        process group is killed."""
        self.shut()
        ended = False
        if orderly:
            with contextlib.suppress(subprocess.TimeoutExpired):
                self.proc.wait(timeout=CLOSE_WAIT)
                ended = True
        if not ended:  # not reaped yet: its process group is still its own
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(self.proc.pid, signal.SIGKILL)
        with contextlib.suppress(Exception):
            self.proc.wait(timeout=5)
        if self.proc.stderr is not None:
            self.proc.stderr.close()
        if self.group is not None:
            release(self.group)
            self.group = None
        discard_private_dir(self.tmpdir)


_LOCK = threading.Lock()
_LAUNCHERS: dict[tuple[object, ...], Launcher] = {}
_STARTING: set[tuple[object, ...]] = set()
_REFUSED: dict[tuple[object, ...], str] = {}
_STALE: list[Launcher] = []
#: Counted up by :func:`close_all`: a launcher whose start began before is closed, not kept.
_GENERATION = [0]
_USES: dict[tuple[str, SandboxPolicy], int] = {}


def _start(
    key: tuple[object, ...], program: str, policy: SandboxPolicy, argv0: str, env: Mapping[str, str], generation: int
) -> None:
    from snodo.sandbox.bwrap import options

    tmpdir = make_private_dir()
    try:
        opts = options(policy, argv0, env, ("--tmpfs", str(tmpdir)))
        launcher = Launcher(program, opts, tmpdir, policy.limits.processes)
    except (EnvironmentProblem, OSError) as exc:
        discard_private_dir(tmpdir)
        with _LOCK:
            _REFUSED[key] = str(exc)
            _STARTING.discard(key)
        return
    retired: list[Launcher] = []
    with _LOCK:
        if generation != _GENERATION[0]:  # everything was closed while it started
            retired.append(launcher)
        else:
            _STARTING.discard(key)
            _LAUNCHERS[key] = launcher
        while len(_LAUNCHERS) > MAX_LAUNCHERS:
            idle = [k for k, v in _LAUNCHERS.items() if k != key and not v.busy()]
            if not idle:
                break
            oldest = min(idle, key=lambda k: _LAUNCHERS[k].used)
            retired.append(_LAUNCHERS.pop(oldest))
    for old in retired:
        old.close()


_Job = tuple[tuple[object, ...], str, SandboxPolicy, str, dict[str, str], int, threading.Event]
_JOBS: queue.SimpleQueue[_Job] = queue.SimpleQueue()
_STARTER: list[threading.Thread] = []


def _starter() -> queue.SimpleQueue[_Job]:
    """Launchers are started by one thread that lives as long as snodo: bubblewrap's
    ``--die-with-parent`` follows the *thread* that started it, not the process."""
    with _LOCK:
        if not _STARTER or not _STARTER[0].is_alive():
            _STARTER[:] = [threading.Thread(target=_start_each, name="snodo-launchers", daemon=True)]
            _STARTER[0].start()
    return _JOBS


def _start_each() -> None:
    while True:
        key, program, policy, argv0, env, generation, done = _JOBS.get()
        try:
            _start(key, program, policy, argv0, env, generation)
        finally:
            done.set()


def launcher_for(program: str, policy: SandboxPolicy, argv0: str, env: Mapping[str, str]) -> Launcher | None:
    """The live launcher of this shape, or ``None`` (run the per-command way) while it is
    starting, when it cannot start here, or before the shape's ``START_AFTER + 1``-th command
    (which starts it)."""
    from snodo.sandbox.bwrap import options, replaced_since

    with _LOCK:  # counted before anything is computed: most policies never get a launcher
        if len(_USES) > 256:
            _USES.clear()
        _USES[(program, policy)] = uses = _USES.get((program, policy), 0) + 1
    if uses <= START_AFTER:
        return None
    key = (program, options(policy, argv0, env, ()), policy.limits)  # each launcher has its own TMPDIR
    with _LOCK:
        launcher = _LAUNCHERS.get(key)
    # A mount whose path the host replaced since is no longer in force in it: a new one.
    stale = launcher is not None and replaced_since(launcher.mounted, key[1])
    with _LOCK:
        dead = [old for old in _STALE if not old.busy()]  # retired stale ones, once idle
        _STALE[:] = [old for old in _STALE if old not in dead]
        if launcher is not None and (stale or not launcher.alive()):
            if _LAUNCHERS.get(key) is launcher:
                del _LAUNCHERS[key]
                # a stale one may still serve a command (that began before the change): closed once idle
                (_STALE if stale and launcher.busy() else dead).append(launcher)
            launcher = None
        start = launcher is None and key not in _STARTING and key not in _REFUSED
        if start:
            _STARTING.add(key)
        generation = _GENERATION[0]
    for old in dead:
        old.close()
    if start:
        done = threading.Event()
        _starter().put((key, program, policy, argv0, dict(env), generation, done))
        if FIRST_USE_WAIT > 0:
            done.wait(FIRST_USE_WAIT)
            with _LOCK:
                launcher = _LAUNCHERS.get(key)
    return launcher


def prepare(
    program: str,
    argv: Sequence[str],
    *,
    cwd: Path,
    env: Mapping[str, str],
    policy: SandboxPolicy,
    named: Sequence[str],
    located: str | None = None,
) -> Prepared | None:
    """A start through this shape's launcher, or ``None``: run the per-command way.
    ``located``: where ``argv[0]`` was found on the command's ``PATH``, if looked up."""
    if os.environ.get(SWITCH_ENV, "").strip().lower() in {"off", "0", "no", "false"}:
        return None
    launcher = launcher_for(program, policy, located or argv[0], env)
    if launcher is None:
        return None
    env = confined_environment(env, named=named, tmpdir=launcher.tmpdir)
    request = launcher.request(argv, cwd=resolved(cwd), env=env, limits=limit_values(policy.limits))
    if request is None:
        return None
    launch = functools.partial(launcher.spawn, request, argv[0])
    return Prepared(backend="bwrap", argv=tuple(argv), env=env, launch=launch)


def refused() -> dict[str, str]:
    """Why a launcher could not start, per shape (for diagnostics and tests)."""
    with _LOCK:
        return {str(k[0]): why for k, why in _REFUSED.items()}


@atexit.register
def close_all() -> None:
    """Close every launcher (at exit; tests that need a fresh start)."""
    with _LOCK:
        launchers = [*_LAUNCHERS.values(), *_STALE]
        _LAUNCHERS.clear()
        _STALE.clear()
        _STARTING.clear()
        _GENERATION[0] += 1
        _REFUSED.clear()
        _USES.clear()
    for launcher in launchers:  # all told first: they end side by side
        launcher.shut()
    for launcher in launchers:
        launcher.close()
