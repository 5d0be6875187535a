"""The interface every confinement backend implements, and what all share: snodo as the
child subreaper while a confined run is under way, so confined orphans are snodo's to sweep
and reap, and only confined ones (docs/security.md, "Backends")."""

from __future__ import annotations

import atexit
import contextlib
import ctypes
import functools
import os
import shutil
import subprocess
import sys
import threading
import time
import types
from collections.abc import Callable, Collection, Iterator, Sequence
from contextlib import AbstractContextManager
from typing import Any, NamedTuple

from attrs import field, frozen

from snodo.base.errors import EnvironmentProblem


@frozen(kw_only=True)
class Prepared:
    """How ``Popen`` starts one child; ``backend`` empty: unconfined."""

    backend: str
    argv: tuple[str, ...]
    env: dict[str, str]
    preexec_fn: Callable[[], None] | None = None
    #: ``(leader_pid, other_leaders)``: kill whatever of the run escaped its process group.
    reap: Callable[[int, Collection[int]], object] | None = field(default=None, eq=False)
    #: Entered around the spawn (the thread joins the run's pids cgroup, :mod:`.cgroup`).
    spawning: Callable[[], AbstractContextManager[None]] = field(default=contextlib.nullcontext, eq=False)
    pass_fds: tuple[int, ...] = ()


TRUE = shutil.which("true") or "/bin/true"
PROBE_TIMEOUT = 15.0


def run_true(prefix: Sequence[str], **popen: Any) -> subprocess.CompletedProcess[str]:
    """A backend's probe: ``true`` started after ``prefix`` (the backend's own), output kept, a time limit."""
    argv = [*prefix, TRUE]
    return subprocess.run(
        argv, capture_output=True, text=True, errors="replace", timeout=PROBE_TIMEOUT, start_new_session=True, **popen
    )


_PR_SET_CHILD_SUBREAPER = 36
_PR_GET_CHILD_SUBREAPER = 37
EXIT_WAIT = 3.0


#: Confined runs under way, whether snodo has been the subreaper (zombies may wait), and
#: whether the program embedding snodo set the flag (then never given up here).
_Adoption = types.SimpleNamespace(runs=0, adopted=False, kept=False)
_ADOPTION = threading.Condition()


def _status(pid: int | str) -> tuple[bool, int, int]:
    """Whether ``pid`` has ``no_new_privs``, its PID namespace depth and its number of seccomp
    filters (``-1``: the kernel does not say, before 5.9); ``(False, 0, -1)`` once it is gone."""
    try:
        with open(f"/proc/{pid}/status", "rb") as fh:
            status = dict(line.partition(b":")[::2] for line in fh.read().splitlines())
    except OSError:
        return False, 0, -1
    nspids, filters = status.get(b"NSpid", b"").split(), int(status.get(b"Seccomp_filters", b"-1"))
    return status.get(b"NoNewPrivs", b"").strip() == b"1", len(nspids), filters


_own = functools.cache(functools.partial(_status, "self"))


def confined(pid: int) -> bool:
    """Whether process ``pid`` runs confined by snodo, by what it cannot shed: ``no_new_privs``
    (snodo's own children never have it), or, when snodo has it itself, a PID namespace
    below snodo's (bubblewrap) or more seccomp filters than snodo (Landlock, :mod:`.harden`)."""
    no_new_privs, depth, filters = _status(pid)
    inherited, own_depth, own_filters = _own()
    return no_new_privs and (not inherited or depth > own_depth or (own_filters >= 0 and filters > own_filters))


@functools.cache
def libc() -> ctypes.CDLL | None:
    """The C library, ``errno`` kept (Linux only)."""
    if not sys.platform.startswith("linux"):
        return None
    try:
        found = ctypes.CDLL(None, use_errno=True)
    except OSError:
        return None
    found.syscall.restype = ctypes.c_long
    return found


def _prctl(option: int, arg: object) -> int | None:
    lib, zero = libc(), ctypes.c_ulong(0)
    return None if lib is None else int(lib.prctl(option, arg, zero, zero, zero))


def hold_adoption() -> Callable[[], None]:
    """One confined run starts: snodo is the subreaper until every run has called the returned
    release; the last one reaps what is still dying and gives the flag up (unless kept)."""
    with _ADOPTION:
        _Adoption.runs += 1
        if _Adoption.runs == 1 and not _Adoption.kept:
            flag = ctypes.c_int(0)
            _Adoption.kept = _prctl(_PR_GET_CHILD_SUBREAPER, ctypes.byref(flag)) == 0 and flag.value != 0
            if _Adoption.kept or _prctl(_PR_SET_CHILD_SUBREAPER, ctypes.c_ulong(1)) is not None:
                _Adoption.adopted = True

    def release() -> None:
        with _ADOPTION:
            _Adoption.runs -= 1
            if _Adoption.runs == 0 and not _Adoption.kept and _Adoption.adopted:
                _reap_dying()
                _prctl(_PR_SET_CHILD_SUBREAPER, ctypes.c_ulong(0))
            _ADOPTION.notify_all()

    return release


@contextlib.contextmanager
def not_adopting(timeout: float) -> Iterator[None]:
    """While no confined run makes snodo the subreaper, and none may start (to launch a
    background job, which must never become snodo's child); waits up to ``timeout`` seconds."""
    with _ADOPTION:
        if not _ADOPTION.wait_for(lambda: _Adoption.runs == 0, timeout=timeout):
            raise EnvironmentProblem(
                f"a confined run still going after {timeout:g} s keeps this process the parent of every "
                "orphan below it; nothing was started",
                hint="try again once the running tests or validators have finished",
            )
        if _Adoption.kept:
            raise EnvironmentProblem(
                "this process adopts every orphan below it for good (the child subreaper); nothing was started"
            )
        yield


class ProcStat(NamedTuple):
    pid: int
    state: bytes  # ``Z``: a zombie
    ppid: int
    pgrp: int
    session: int
    started: int  # clock ticks since boot


def processes() -> Iterator[ProcStat]:
    try:
        names = os.listdir("/proc")
    except OSError:
        return
    for name in names:
        if not name.isdigit():
            continue
        try:
            with open(f"/proc/{name}/stat", "rb") as fh:
                fields = fh.read().rsplit(b")", 1)[1].split()
            yield ProcStat(int(name), fields[0], *map(int, (fields[1], fields[2], fields[3], fields[19])))
        except (OSError, IndexError, ValueError):
            continue


def _children() -> Iterator[ProcStat]:
    me = os.getpid()
    return (p for p in processes() if p.ppid == me)


def reap_adopted(spare: Collection[int]) -> int:
    """Reap the zombies of adopted confined processes but the leaders some ``Popen`` waits for
    (``spare``): the kernel names the next zombie; only when it is not ours is ``/proc`` searched."""
    if not _Adoption.adopted:
        return 0
    reaped = 0
    while True:
        try:
            info = os.waitid(os.P_ALL, 0, os.WEXITED | os.WNOHANG | os.WNOWAIT)
        except ChildProcessError:
            return reaped
        if info is None:
            return reaped
        if info.si_pid in spare or not confined(info.si_pid):
            return reaped + _reap_by_scan(spare)
        with contextlib.suppress(ChildProcessError, OSError):
            os.waitpid(info.si_pid, os.WNOHANG)
        reaped += 1


def _reap_by_scan(spare: Collection[int]) -> int:
    reaped = 0
    for child in _children():
        if child.state == b"Z" and child.pid not in spare and confined(child.pid):
            with contextlib.suppress(ChildProcessError, OSError):
                os.waitpid(child.pid, os.WNOHANG)
                reaped += 1
    return reaped


def _reap_dying() -> None:
    """Reap the adopted confined processes, waiting up to :data:`EXIT_WAIT` for those still dying."""
    deadline = time.monotonic() + EXIT_WAIT
    while True:
        try:
            os.waitid(os.P_ALL, 0, os.WEXITED | os.WNOHANG | os.WNOWAIT)
        except ChildProcessError:
            return  # no child at all
        # looked at before reaping: one that ends in between is reaped
        alive = any(c.state not in (b"Z", b"X") and confined(c.pid) for c in _children())
        reap_adopted(())
        if not alive or time.monotonic() >= deadline:
            return
        time.sleep(0.002)


@atexit.register  # registered first of snodo's exit handlers, so it runs last
def reap_at_exit() -> None:
    if _Adoption.adopted:
        _reap_dying()
