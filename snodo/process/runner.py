"""Run a child process the way governance needs: no shell, its own process group, bounded.

A timeout (or a silence timeout: no output for too long) kills the whole process group,
so a test suite's forked workers or a coder's helpers cannot outlive the verdict.
Output is read in bounded chunks, streamed line by line to ``on_line`` (a job log, a
progress display) and kept bounded (head and tail);
``stop_if`` lets the caller end the run on a line it recognises (a coder's fatal event).
With a :class:`~snodo.sandbox.SandboxPolicy` the child runs confined (docs/security.md);
:func:`terminate_all` kills every live child tree (on SIGINT/SIGTERM and at exit).
"""

from __future__ import annotations

import atexit
import contextlib
import os
import signal
import subprocess
import threading
import time
from collections.abc import Callable, Collection, Mapping, Sequence
from pathlib import Path

from snodo.attrsbase import frozen
from snodo.base.errors import EnvironmentProblem
from snodo.process import callscope
from snodo.process.output import CHUNK, BoundedOutput, ExitWatch, collect, drain
from snodo.process.prepare import prepare_child, release_child, shown
from snodo.sandbox import Prepared, SandboxPolicy
from snodo.sandbox.base import reap_adopted
from snodo.sandbox.choose import distrust


@frozen(kw_only=True)
class ProcessResult:
    argv: tuple[str, ...]
    returncode: int | None
    output: str
    timed_out: bool
    silent_too_long: bool
    duration: float
    stopped: bool = False  # ``stop_if`` matched a line and the process group was killed

    @property
    def ok(self) -> bool:
        return self.returncode == 0 and not self.timed_out and not self.silent_too_long and not self.stopped

    def tail(self, lines: int = 40) -> str:
        return "\n".join(self.output.splitlines()[-lines:])


def _kill_group(proc: subprocess.Popen[bytes]) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(proc.pid, signal.SIGKILL)


_LIVE_LOCK = threading.Lock()
_LIVE: dict[int, tuple[subprocess.Popen[bytes], Prepared | None]] = {}
_LIVE_ARGV: dict[int, tuple[str, ...]] = {}
#: Starts under way (a child that may already run, not yet in ``_LIVE``): :func:`terminate_all`
#: waits for them, so a child started just before it is not missed.
_STARTING = [0]
_STARTED = threading.Condition(_LIVE_LOCK)
#: Seconds :func:`terminate_all` waits, at most, for the starts under way.
_START_WAIT = 5.0


def _other_leaders(pid: int) -> frozenset[int]:
    with _LIVE_LOCK:
        return frozenset(_LIVE) - {pid}


def live_processes() -> list[tuple[str, ...]]:
    """The argv (as asked, before confinement) of every child tree running right now."""
    with _LIVE_LOCK:
        return list(_LIVE_ARGV.values())


def terminate_all() -> int:
    """Kill every child tree :func:`run_process` started that is still running, those being
    started right now included; how many."""
    with _LIVE_LOCK:
        _STARTED.wait_for(lambda: not _STARTING[0], timeout=_START_WAIT)
        live = list(_LIVE.values())
    for proc, prepared in live:
        _kill_group(proc)
        if prepared is not None and prepared.reap is not None:
            with contextlib.suppress(Exception):
                prepared.reap(proc.pid, ())
    return len(live)


atexit.register(terminate_all)


def run_process(
    argv: Sequence[str],
    *,
    cwd: Path,
    timeout: float,
    silence_timeout: float | None = None,
    env: Mapping[str, str] | None = None,
    on_line: Callable[[str], None] | None = None,
    stdin_text: str | None = None,
    max_output: int = 2_000_000,
    sandbox: SandboxPolicy | None = None,
    stop_if: Callable[[str], bool] | None = None,
    pass_env: Sequence[str] = (),
) -> ProcessResult:
    """Run ``argv`` in ``cwd``; never raises for the child's own failure, only when it
    cannot start at all (:class:`EnvironmentProblem` naming the program).

    With ``sandbox`` the child runs confined by the backend that works here, or not at all
    (``EnvironmentProblem`` naming what to install) — unless the policy's mode is ``off``:
    then it runs unconfined and the policy's ``on_unconfined`` callback is told.
    The child's ``PWD`` is always ``cwd`` (programs that trust ``$PWD`` work where told).
    A confined child sees an allowlisted environment (:mod:`snodo.sandbox.environ`) plus
    the policy's ``env`` names and ``pass_env`` (what the calling plugin needs, e.g. its
    provider's API key variable). Output is kept bounded to ``max_output`` bytes (head and
    tail, with a marker where it was cut; :mod:`snodo.process.output`).
    """
    start = time.monotonic()
    popen_argv, child_env, prepared, tmpdir = prepare_child(argv, cwd, env, sandbox, pass_env)
    try:
        return _run(
            argv,
            popen_argv,
            cwd=cwd,
            env=child_env,
            prepared=prepared,
            start=start,
            timeout=timeout,
            silence_timeout=silence_timeout,
            on_line=on_line,
            stdin_text=stdin_text,
            max_output=max_output,
            stop_if=stop_if,
        )
    finally:
        release_child(prepared, tmpdir)


class Started:
    """A child started ahead of its work (:func:`start_process`), its stdin held open: it
    may prepare, but gets its work only from :meth:`finish`, which writes ``stdin_text``,
    closes stdin and then waits as :func:`run_process` does, its time limit counted from
    there. :meth:`discard` ends one that is not wanted; at exit every one is killed."""

    def __init__(
        self,
        argv: Sequence[str],
        popen_argv: Sequence[str],
        *,
        cwd: Path,
        env: dict[str, str],
        prepared: Prepared | None,
        tmpdir: Path | None,
    ) -> None:
        self.argv, self.cwd, self.prepared, self.tmpdir = tuple(argv), cwd, prepared, tmpdir
        self._popen_argv, self._env = popen_argv, env
        self._lock = threading.Lock()
        self._done = False
        try:
            self.proc = _spawn(argv, popen_argv, cwd=cwd, env=env, prepared=prepared, stdin=True)
        except BaseException:
            release_child(prepared, tmpdir)
            raise

    def running(self) -> bool:
        return not self._done and self.proc.poll() is None

    def finish(self, stdin_text: str, *, timeout: float, max_output: int = 2_000_000) -> ProcessResult:
        with self._lock:
            if self._done:
                raise EnvironmentProblem(f"cannot run {shown(self.argv[0])!r}: it was already finished or discarded")
            self._done = True
        try:
            return _run(
                self.argv,
                self._popen_argv,
                cwd=self.cwd,
                env=self._env,
                prepared=self.prepared,
                start=time.monotonic(),
                timeout=timeout,
                silence_timeout=None,
                on_line=None,
                stdin_text=stdin_text,
                max_output=max_output,
                stop_if=None,
                spawned=self.proc,
            )
        except BaseException:  # stopped before or while waiting: the child does not outlive it
            self._end()
            raise
        finally:
            release_child(self.prepared, self.tmpdir)

    def discard(self) -> None:
        with self._lock:
            if self._done:
                return
            self._done = True
        try:
            self._end()
        finally:
            release_child(self.prepared, self.tmpdir)

    def _end(self) -> None:
        proc = self.proc
        try:
            _kill_group(proc)
            if self.prepared is not None and self.prepared.reap is not None:
                self.prepared.reap(proc.pid, _other_leaders(proc.pid))
            with contextlib.suppress(Exception):
                proc.kill()
            proc.wait()
            for stream in (proc.stdin, proc.stdout):
                if stream is not None:
                    with contextlib.suppress(OSError):
                        stream.close()
        finally:
            with _LIVE_LOCK:
                _LIVE.pop(proc.pid, None)
                _LIVE_ARGV.pop(proc.pid, None)


def start_process(
    argv: Sequence[str],
    *,
    cwd: Path,
    env: Mapping[str, str] | None = None,
    sandbox: SandboxPolicy | None = None,
    pass_env: Sequence[str] = (),
) -> Started:
    """Start ``argv`` now, as :func:`run_process` would (confined the same way), with its
    stdin a pipe kept open until :meth:`Started.finish`."""
    popen_argv, child_env, prepared, tmpdir = prepare_child(argv, cwd, env, sandbox, pass_env)
    return Started(argv, popen_argv, cwd=cwd, env=child_env, prepared=prepared, tmpdir=tmpdir)


def _spawn(
    argv: Sequence[str],
    popen_argv: Sequence[str],
    *,
    cwd: Path,
    env: dict[str, str],
    prepared: Prepared | None,
    stdin: bool,
) -> subprocess.Popen[bytes]:
    """Start the child and count it live."""
    program = shown(argv[0])
    how = f" confined by {prepared.backend}" if prepared is not None else ""
    proc: subprocess.Popen[bytes] | None = None
    with _LIVE_LOCK:
        _STARTING[0] += 1
    try:
        proc = _start(popen_argv, cwd, env, prepared, stdin, program, how)
    finally:
        with _LIVE_LOCK:
            _STARTING[0] -= 1
            if proc is not None:
                _LIVE[proc.pid] = (proc, prepared)
                _LIVE_ARGV[proc.pid] = tuple(argv)
            _STARTED.notify_all()
    return proc


def _start(
    popen_argv: Sequence[str],
    cwd: Path,
    env: dict[str, str],
    prepared: Prepared | None,
    stdin: bool,
    program: str,
    how: str,
) -> subprocess.Popen[bytes]:
    spawning = prepared.spawning if prepared is not None and prepared.spawning is not None else contextlib.nullcontext
    proc: subprocess.Popen[bytes]
    try:
        with spawning():
            proc = subprocess.Popen(
                list(popen_argv),
                cwd=cwd,
                env=env,
                stdin=subprocess.PIPE if stdin else subprocess.DEVNULL,
                stdout=subprocess.PIPE,
                stderr=subprocess.STDOUT,
                start_new_session=True,
                pass_fds=prepared.pass_fds if prepared is not None else (),
                preexec_fn=prepared.preexec_fn if prepared is not None else None,  # noqa: PLW1509
            )
    except FileNotFoundError:
        raise EnvironmentProblem(
            f"cannot run {program!r}{how}: program not found", hint="install it or fix the command"
        ) from None
    except subprocess.SubprocessError as exc:  # preexec_fn failed: the sandbox did not start
        raise EnvironmentProblem(f"cannot run {program!r}{how}: the sandbox did not start ({exc})") from None
    except OSError as exc:
        raise EnvironmentProblem(f"cannot run {program!r}{how}: {exc.strerror or exc}") from None
    return proc


def _run(
    argv: Sequence[str],
    popen_argv: Sequence[str],
    *,
    cwd: Path,
    env: dict[str, str],
    prepared: Prepared | None,
    start: float,
    timeout: float,
    silence_timeout: float | None,
    on_line: Callable[[str], None] | None,
    stdin_text: str | None,
    max_output: int,
    stop_if: Callable[[str], bool] | None,
    spawned: subprocess.Popen[bytes] | None = None,
) -> ProcessResult:
    program = shown(argv[0])
    how = f" confined by {prepared.backend}" if prepared is not None else ""
    call = callscope.current()  # an MCP call that may be cancelled (snodo/process/callscope.py)
    if call is not None:
        call.check()
    if spawned is not None:
        proc = spawned
    else:
        proc = _spawn(argv, popen_argv, cwd=cwd, env=env, prepared=prepared, stdin=stdin_text is not None)
    if call is not None:
        call.add(proc.pid, lambda: _kill_group(proc))
    try:
        reap = prepared.reap if prepared is not None else None
        result = _wait(argv, proc, start, timeout, silence_timeout, on_line, stdin_text, max_output, reap, stop_if)
    except BaseException:  # interrupted while waiting: nothing it spawned may keep running
        _kill_group(proc)
        if prepared is not None and prepared.reap is not None:
            prepared.reap(proc.pid, _other_leaders(proc.pid))
        raise
    finally:
        _kill_group(proc)
        with contextlib.suppress(Exception):
            proc.kill()
        proc.wait()
        with _LIVE_LOCK:
            _LIVE.pop(proc.pid, None)
            _LIVE_ARGV.pop(proc.pid, None)
        if call is not None:
            call.discard(proc.pid)
        if prepared is not None:
            reap_adopted(_other_leaders(proc.pid))
    if (
        prepared is not None
        and prepared.backend == "bwrap"
        and result.returncode == 1
        and result.output.startswith("bwrap: ")
    ):
        said = result.output.splitlines()[0]
        distrust(prepared.backend)  # a remembered probe may be stale: the next process probes again
        raise EnvironmentProblem(
            f"cannot run {program!r}{how}: the sandbox did not start ({said})",
            hint="`snodo doctor` shows whether confinement works here; see docs/security.md",
        )
    return result


def _wait(
    argv: Sequence[str],
    proc: subprocess.Popen[bytes],
    start: float,
    timeout: float,
    silence_timeout: float | None,
    on_line: Callable[[str], None] | None,
    stdin_text: str | None,
    max_output: int,
    reap: Callable[[int, Collection[int]], object] | None,
    stop_if: Callable[[str], bool] | None,
) -> ProcessResult:
    out = BoundedOutput(max_output)
    if on_line is None and stdin_text is None and stop_if is None:  # nobody needs a reader thread
        why = collect(proc, out, deadline=start + timeout, silence_timeout=silence_timeout)
        if why != "exited":
            _kill_group(proc)
            proc.wait()
        _kill_group(proc)  # the leader exited: nothing it spawned may keep the pipe open
        if reap is not None:
            reap(proc.pid, _other_leaders(proc.pid))
        drain(proc, out, 5)
        if proc.stdout is not None:
            proc.stdout.close()
        return ProcessResult(
            argv=tuple(argv),
            returncode=proc.returncode if why == "exited" else None,
            output=out.text(),
            timed_out=why == "timeout",
            silent_too_long=why == "silent",
            duration=time.monotonic() - start,
        )
    last_output = time.monotonic()
    lock = threading.Lock()
    stop = threading.Event()

    def pump() -> None:
        nonlocal last_output
        assert proc.stdout is not None
        fd = proc.stdout.fileno()
        callback = on_line

        def show(line: str) -> None:
            nonlocal callback
            if callback is None:
                return
            try:
                callback(line)
            except Exception as exc:  # a broken display must not stall the child: keep pumping
                callback = None
                with lock:
                    out.note(
                        f"[snodo: the output callback failed ({type(exc).__name__}: {exc}); "
                        "the output is kept but no longer streamed]"
                    )

        while chunk := os.read(fd, CHUNK):
            with lock:
                last_output = time.monotonic()
                lines = out.feed(chunk)
            for line in lines:
                show(line)
                if stop_if is not None and not stop.is_set() and stop_if(line):
                    stop.set()
        last = out.finish()
        if last is not None:
            show(last)
            if stop_if is not None and not stop.is_set() and stop_if(last):
                stop.set()

    reader = threading.Thread(target=pump, daemon=True)
    reader.start()
    if stdin_text is not None and proc.stdin is not None:
        try:
            proc.stdin.write(stdin_text.encode())
            proc.stdin.close()
        except BrokenPipeError:
            pass

    timed_out = silent = False
    deadline = start + timeout
    exited = ExitWatch(proc)
    try:
        # Woken by the child's exit itself (a pidfd), not by polling: a short process costs
        # no sleeping; every 50 ms the time limits and ``stop_if`` are checked.
        while not exited(min(0.05, max(0.0, deadline - time.monotonic()))):
            now = time.monotonic()
            if now >= deadline:
                timed_out = True
            elif silence_timeout is not None:
                with lock:
                    silent = now - last_output >= silence_timeout
            if timed_out or silent or stop.is_set():
                _kill_group(proc)
                proc.wait()
                break
    finally:
        exited.close()
    # The leader exited; make sure nothing it spawned keeps the pipe (and us) alive.
    _kill_group(proc)
    if reap is not None:
        reap(proc.pid, _other_leaders(proc.pid))
    reader.join(timeout=5)
    if proc.stdout is not None:
        proc.stdout.close()
    return ProcessResult(
        argv=tuple(argv),
        returncode=None if (timed_out or silent or stop.is_set()) else proc.returncode,
        output=out.text(),
        timed_out=timed_out,
        silent_too_long=silent,
        stopped=stop.is_set(),
        duration=time.monotonic() - start,
    )
