"""Run a child process the way governance needs: no shell, its own process group, bounded.

A timeout (or a silence timeout: no output for too long) kills the whole process group,
so a test suite's forked workers or a coder's helpers cannot outlive the verdict.
Output is streamed line by line to ``on_line`` (a job log, a progress display) and kept.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path

from attrs import frozen

from snodo.errors import EnvironmentProblem


@frozen(kw_only=True)
class ProcessResult:
    argv: tuple[str, ...]
    returncode: int | None
    output: str
    timed_out: bool
    silent_too_long: bool
    duration: float

    @property
    def ok(self) -> bool:
        return self.returncode == 0 and not self.timed_out and not self.silent_too_long

    def tail(self, lines: int = 40) -> str:
        return "\n".join(self.output.splitlines()[-lines:])


def _kill_group(proc: subprocess.Popen[str]) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(proc.pid, signal.SIGKILL)


# Live children of run_process, by process group id, so an interrupt can kill them all.
_live: dict[int, tuple[str, ...]] = {}
_live_lock = threading.RLock()  # re-entrant: a signal handler may run while the main thread holds it


def live_processes() -> list[tuple[str, ...]]:
    """The argv of every child tree :func:`run_process` has running right now."""
    with _live_lock:
        return list(_live.values())


def terminate_all() -> int:
    """Kill every child tree started by :func:`run_process` (SIGINT/SIGTERM handling);
    returns how many process groups were signalled. Safe to call from a signal handler."""
    with _live_lock:
        groups = list(_live)
    for pgid in groups:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(pgid, signal.SIGKILL)
    return len(groups)


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
) -> ProcessResult:
    """Run ``argv`` in ``cwd``; never raises for the child's own failure, only when it
    cannot start at all (:class:`EnvironmentProblem` naming the program)."""
    start = time.monotonic()
    if not Path(cwd).is_dir():  # Popen would blame the program for a missing directory
        raise EnvironmentProblem(f"cannot run {argv[0]!r}: the working directory {cwd} does not exist")
    try:
        proc = subprocess.Popen(
            list(argv),
            cwd=cwd,
            env=dict(env) if env is not None else None,
            stdin=subprocess.PIPE if stdin_text is not None else subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            encoding="utf-8",
            errors="replace",
            start_new_session=True,
        )
    except FileNotFoundError:
        raise EnvironmentProblem(
            f"cannot run {argv[0]!r}: program not found", hint="install it or fix the command"
        ) from None
    except OSError as exc:
        raise EnvironmentProblem(f"cannot run {argv[0]!r}: {exc}") from None

    with _live_lock:
        _live[proc.pid] = tuple(argv)
    try:
        return _supervise(proc, argv, start, timeout, silence_timeout, on_line, stdin_text, max_output)
    finally:
        _kill_group(proc)
        with _live_lock:
            _live.pop(proc.pid, None)


def _supervise(
    proc: subprocess.Popen[str],
    argv: Sequence[str],
    start: float,
    timeout: float,
    silence_timeout: float | None,
    on_line: Callable[[str], None] | None,
    stdin_text: str | None,
    max_output: int,
) -> ProcessResult:
    chunks: list[str] = []
    size = 0
    last_output = time.monotonic()
    lock = threading.Lock()

    def pump() -> None:
        nonlocal size, last_output
        assert proc.stdout is not None
        for line in proc.stdout:
            with lock:
                last_output = time.monotonic()
                if size < max_output:
                    chunks.append(line)
                    size += len(line)
            if on_line is not None:
                on_line(line.rstrip("\n"))

    reader = threading.Thread(target=pump, daemon=True)
    reader.start()
    if stdin_text is not None and proc.stdin is not None:
        try:
            proc.stdin.write(stdin_text)
            proc.stdin.close()
        except BrokenPipeError:
            pass

    timed_out = silent = False
    deadline = start + timeout
    while True:
        try:
            proc.wait(timeout=0.05)
            break
        except subprocess.TimeoutExpired:
            now = time.monotonic()
            if now >= deadline:
                timed_out = True
            elif silence_timeout is not None:
                with lock:
                    silent = now - last_output >= silence_timeout
            if timed_out or silent:
                _kill_group(proc)
                proc.wait()
                break
    # The leader exited; make sure nothing it spawned keeps the pipe (and us) alive.
    _kill_group(proc)
    reader.join(timeout=5)
    if proc.stdout is not None:
        proc.stdout.close()
    return ProcessResult(
        argv=tuple(argv),
        returncode=None if (timed_out or silent) else proc.returncode,
        output="".join(chunks),
        timed_out=timed_out,
        silent_too_long=silent,
        duration=time.monotonic() - start,
    )
