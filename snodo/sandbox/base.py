"""The small interface every confinement backend implements (bubblewrap, Landlock; a macOS
Seatbelt profile would be a third), and what both share: snodo as the child subreaper.

Orphans of confined processes (a double fork, ``setsid``, and bubblewrap's init, which
outlives its monitor by a moment) are reparented to snodo instead of the system's init, so
a run's sweep finds them and snodo reaps them. Only confined processes (``no_new_privs``:
every confined process has it, snodo's own children such as git never do) are reaped here,
so no ``Popen`` ever loses its child's exit status.

snodo is the subreaper only while a confined run is under way (:func:`adopting`), never
for good: every orphan below a subreaper goes to it, a background job's process included
(its launcher exits at once), and a job adopted by ``snodo serve`` is one more child of
the server — which a host that kills the server's process tree on exit kills with it.
A job is launched only while no confined run holds the flag (:func:`not_adopting`).

When snodo itself runs with ``no_new_privs`` (a container started with
``no-new-privileges``, Kubernetes' ``allowPrivilegeEscalation: false``, another sandbox),
every child of snodo has it too, git included, so it marks nothing: then a process is
confined when it is in a PID namespace below snodo's (bubblewrap) or has more seccomp
filters than snodo (every Landlock child gets one more, :mod:`.harden`); neither can be
shed by the process or its descendants (:func:`confined`).

A confined command's CPU time is in the rusage of bubblewrap's init; reaped by snodo, it
counts in snodo's children's time (what ``time`` and the benchmarks report). Left unreaped
at exit it went to the system's init and a governed run looked cheaper than it was: at
exit snodo waits a moment (:data:`EXIT_WAIT`) for the adopted processes that are still
dying (``--die-with-parent`` kills them) and reaps them.
"""

from __future__ import annotations

import abc
import atexit
import contextlib
import ctypes
import functools
import os
import sys
import threading
import time
from collections.abc import Callable, Collection, Iterator, Mapping, Sequence
from contextlib import AbstractContextManager
from pathlib import Path

from attrs import field, frozen

from snodo.base.errors import EnvironmentProblem
from snodo.sandbox.policy import SandboxPolicy


@frozen(kw_only=True)
class Prepared:
    """How to start one confined child: the argv and environment to hand to ``Popen``, a
    ``preexec_fn`` (Landlock restricts the child there), and what to do once it ended."""

    backend: str
    argv: tuple[str, ...]
    env: dict[str, str]
    preexec_fn: Callable[[], None] | None = None
    #: After the child's process group is gone: kill whatever escaped it
    #: (``leader_pid``, the leaders of the other live runs, which it must spare).
    reap: Callable[[int, Collection[int]], object] | None = field(default=None, eq=False)
    #: Always called last: closes descriptors, removes the private temporary directory.
    cleanup: Callable[[], None] | None = field(default=None, eq=False)
    #: Entered around the spawn (the thread joins the run's pids cgroup, :mod:`.cgroup`).
    spawning: Callable[[], AbstractContextManager[None]] | None = field(default=None, eq=False)
    #: Descriptors the child inherits under the same numbers (bubblewrap's seccomp program).
    pass_fds: tuple[int, ...] = ()


class Backend(abc.ABC):
    """One way to confine a child process on this platform."""

    name: str = ""

    @abc.abstractmethod
    def probe(self) -> str | None:
        """Start a trivial confined process; ``None`` when that worked, else why not."""

    def overlays(self) -> bool:
        """Whether the backend can confine a workspace as a private overlay of itself
        (:attr:`SandboxPolicy.overlay`)."""
        return False

    @abc.abstractmethod
    def prepare(
        self, argv: Sequence[str], *, cwd: Path, env: Mapping[str, str], policy: SandboxPolicy, tmpdir: Path
    ) -> Prepared:
        """Turn ``argv`` into a confined start; raises ``EnvironmentProblem`` if it cannot."""


_PR_SET_CHILD_SUBREAPER = 36
_PR_GET_CHILD_SUBREAPER = 37
#: Seconds snodo waits at exit, at most, for adopted confined processes to end (they are
#: being killed; only a machine under heavy load takes more than a few milliseconds).
EXIT_WAIT = 3.0
#: Set once snodo has been the subreaper: adopted zombies may be waiting to be reaped.
_SUBREAPER: list[bool] = []
#: Confined runs between their preparation and their release (:func:`adopting`), and
#: whether the flag stays set for good (:func:`become_subreaper`).
_RUNS = [0]
_FOR_GOOD: list[bool] = []
_ADOPTION = threading.Condition()


def _status(pid: int | str) -> dict[bytes, bytes]:
    try:
        with open(f"/proc/{pid}/status", "rb") as fh:
            lines = fh.read().splitlines()
    except OSError:
        return {}
    return dict(line.partition(b":")[::2] for line in lines)


def _nspid_depth(status: dict[bytes, bytes]) -> int:
    return len(status.get(b"NSpid", b"").split())


def _filters(status: dict[bytes, bytes]) -> int:
    try:
        return int(status.get(b"Seccomp_filters", b"-1"))
    except ValueError:
        return -1


@functools.cache
def _own() -> tuple[bool, int, int]:
    """Whether snodo itself has ``no_new_privs`` (it cannot lose it), its PID namespace
    depth and its number of seccomp filters (``-1``: the kernel does not say, before 5.9)."""
    status = _status("self")
    return status.get(b"NoNewPrivs", b"").strip() == b"1", _nspid_depth(status), _filters(status)


def inherited_no_new_privs() -> bool:
    """Whether snodo runs with ``no_new_privs`` itself (so every child of it has it)."""
    return _own()[0]


def confined(pid: int) -> bool:
    """Whether process ``pid`` runs confined by snodo, by what it cannot shed: ``no_new_privs``
    (snodo's own children never have it), or, when snodo has it itself, a PID namespace
    below snodo's or more seccomp filters than snodo. ``False`` when it is gone, or when
    the kernel does not say."""
    status = _status(pid)
    if status.get(b"NoNewPrivs", b"").strip() != b"1":
        return False
    inherited, depth, filters = _own()
    if not inherited:
        return True
    return _nspid_depth(status) > depth or (filters >= 0 and _filters(status) > filters)


def _set_subreaper(on: bool) -> bool:
    if not sys.platform.startswith("linux"):
        return False
    try:
        libc = ctypes.CDLL(None, use_errno=True)
    except OSError:
        return False
    flag = ctypes.c_ulong(1 if on else 0)
    libc.prctl(_PR_SET_CHILD_SUBREAPER, flag, ctypes.c_ulong(0), ctypes.c_ulong(0), ctypes.c_ulong(0))
    return True


def _subreaper_already() -> bool:
    """Whether this process is the subreaper already, by someone else's doing (a test
    harness, the conformance kit, an embedding program): then the flag is theirs to keep."""
    if not sys.platform.startswith("linux"):
        return False
    try:
        libc = ctypes.CDLL(None, use_errno=True)
    except OSError:
        return False
    flag = ctypes.c_int(0)
    if libc.prctl(_PR_GET_CHILD_SUBREAPER, ctypes.byref(flag), ctypes.c_ulong(0), ctypes.c_ulong(0), ctypes.c_ulong(0)):
        return False
    return flag.value != 0


def become_subreaper() -> None:
    """For the rest of the process: orphans of confined processes (a double fork,
    ``setsid``) are reparented to snodo instead of init. Confined runs use :func:`adopting`."""
    with _ADOPTION:
        if not _FOR_GOOD and _set_subreaper(True):
            _FOR_GOOD.append(True)
            if not _SUBREAPER:
                _SUBREAPER.append(True)


def hold_adoption() -> Callable[[], None]:
    """One confined run starts: snodo is the subreaper until every run has called the
    returned release, so the run's sweep finds its orphans even when they cleared their
    environment. The last release reaps what is still dying (bubblewrap's init outlives its
    monitor by a moment), then gives the flag up. Release is idempotent."""
    with _ADOPTION:
        _RUNS[0] += 1
        if _RUNS[0] == 1 and not _FOR_GOOD and _subreaper_already():
            _FOR_GOOD.append(True)  # set by the process that embeds snodo: never given up here
        if _RUNS[0] == 1 and not _FOR_GOOD and _set_subreaper(True) and not _SUBREAPER:
            _SUBREAPER.append(True)
        if _FOR_GOOD and not _SUBREAPER:
            _SUBREAPER.append(True)
    released: list[bool] = []

    def release() -> None:
        with _ADOPTION:
            if released:
                return
            released.append(True)
            _RUNS[0] -= 1
            if _RUNS[0] == 0 and not _FOR_GOOD and _SUBREAPER:
                _reap_dying()
                _set_subreaper(False)
            _ADOPTION.notify_all()

    return release


@contextlib.contextmanager
def not_adopting(timeout: float) -> Iterator[None]:
    """While no confined run makes snodo the subreaper, and none may start: what a process
    that must never become snodo's child (a background job, :mod:`snodo.engine.jobs`) is
    launched in. Waits up to ``timeout`` seconds for the runs under way to end, else raises
    ``EnvironmentProblem``."""

    with _ADOPTION:
        if not _ADOPTION.wait_for(lambda: _RUNS[0] == 0, timeout=timeout):
            raise EnvironmentProblem(
                f"a confined run still going after {timeout:g} s keeps this process the parent of every "
                "orphan below it; nothing was started",
                hint="try again once the running tests or validators have finished",
            )
        if _FOR_GOOD:
            raise EnvironmentProblem(
                "this process adopts every orphan below it for good (the child subreaper); nothing was started"
            )
        yield


def reap_adopted(spare: Collection[int]) -> int:
    """Once snodo is the subreaper, orphans of *any* confined run end as its zombies: reap
    those — confined, not a leader some ``Popen`` still waits for (``spare``). The kernel
    names the next zombie (``waitid`` without reaping); only when that one is not ours to
    reap is ``/proc`` searched for the others."""
    if not _SUBREAPER:
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


def _children() -> Iterator[tuple[int, bytes]]:
    """Each child of this process with its state letter (``Z``: a zombie), from ``/proc``."""
    me = os.getpid()
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            with open(f"/proc/{name}/stat", "rb") as fh:
                fields = fh.read().rsplit(b")", 1)[1].split()
        except OSError:
            continue
        if int(fields[1]) == me:
            yield int(name), fields[0]


def _reap_by_scan(spare: Collection[int]) -> int:
    reaped = 0
    for pid, state in _children():
        if state == b"Z" and pid not in spare and confined(pid):
            with contextlib.suppress(ChildProcessError, OSError):
                os.waitpid(pid, os.WNOHANG)
                reaped += 1
    return reaped


def _confined_children() -> bool:
    """Whether a confined child of snodo is still alive (not yet a zombie)."""
    return any(state not in (b"Z", b"X") and confined(pid) for pid, state in _children())


def reap_at_exit() -> None:
    """At exit (after every other exit handler of snodo: registered first, so it runs last):
    reap the adopted confined processes, waiting up to :data:`EXIT_WAIT` for those still
    dying (bubblewrap's init ends a moment after its monitor; on a loaded machine, many
    moments). A zombie that is not snodo's to reap does not end the wait. Returns at once
    when snodo has no child left (the usual case)."""
    if not _SUBREAPER:
        return
    _reap_dying()


def _reap_dying() -> None:
    deadline = time.monotonic() + EXIT_WAIT
    while True:
        try:
            os.waitid(os.P_ALL, 0, os.WEXITED | os.WNOHANG | os.WNOWAIT)
        except ChildProcessError:
            return  # no child at all
        alive = _confined_children()  # looked at before reaping: one that ends between is reaped
        reap_adopted(())
        if not alive or time.monotonic() >= deadline:
            return  # nothing confined left alive, or out of time
        time.sleep(0.002)


atexit.register(reap_at_exit)
