"""Landlock (Linux ≥ 5.13): the kernel's unprivileged access control, no extra program.

The ruleset is built in snodo's process (opening each granted path once); the child only
sets ``no_new_privs`` and restricts itself in ``preexec_fn`` — two system calls, so the
cost per process stays small. Landlock can only *grant* access below a path, never deny
below a granted one, so the grants are laid out around what must stay out of reach
(``layout.carve``):

- read: every entry of ``/`` except the path to each hidden directory (``$SNODO_HOME``),
  whose siblings are granted instead; the workspace is granted on its own;
- write: every entry of the workspace except ``.snodo``, ``.git`` and protected paths
  (again siblings all the way down), the private temporary directory and a few devices.
  The cost: the workspace directory itself (and each directory on the way to a protected
  path) gets no write grant, so a confined process cannot create, rename or delete entries
  directly in it — no new top-level files. Files already there stay writable.
- network: TCP bind and connect refused unless allowed (Landlock ABI ≥ 4; UDP is not
  covered); abstract UNIX sockets and signals scoped to the sandbox (ABI ≥ 6).

Killing the tree: the child starts its own session and process group, and snodo is the
child subreaper; when the run ends the group, the session, every process carrying the run's
marker in its environment and every confined orphan reparented to snodo are killed.
Capabilities, the seccomp filter and resource limits: :mod:`snodo.sandbox.harden`,
:mod:`snodo.sandbox.limits`.

The sandbox's machinery, for a Landlock child, is snodo itself (its parent) and the other
confined runs: the kernel refuses every ptrace-mode access (``ptrace``, ``/proc/<pid>/mem``,
``/proc/<pid>/fd/N``, ``pidfd_getfd``, ``process_vm_*``) from a Landlock domain to a process
outside it, and the seccomp filter (:mod:`snodo.sandbox.harden`) refuses those system calls
outright.
"""

from __future__ import annotations

import contextlib
import ctypes
import functools
import os
import platform
import secrets
import shutil
import signal
import stat
import subprocess
import sys
from collections.abc import Callable, Collection, Mapping, Sequence
from pathlib import Path

from snodo.base.errors import EnvironmentProblem
from snodo.sandbox.base import Backend, Prepared, confined
from snodo.sandbox.harden import Hardening
from snodo.sandbox.layout import carve, read_only_paths
from snodo.sandbox.limits import limit_setter
from snodo.sandbox.policy import Limits, SandboxPolicy, interpreter_dirs, resolved

# System call numbers (the same on every architecture that has Landlock).
_SYS_CREATE_RULESET, _SYS_ADD_RULE, _SYS_RESTRICT_SELF = 444, 445, 446
_CREATE_RULESET_VERSION = 1
_RULE_PATH_BENEATH = 1
_PR_SET_NO_NEW_PRIVS = 38
_PR_SET_PDEATHSIG = 1

FS_EXECUTE = 1 << 0
FS_WRITE_FILE = 1 << 1
FS_READ_FILE = 1 << 2
FS_READ_DIR = 1 << 3
FS_ABI1_ALL = (1 << 13) - 1  # execute … make_sym
FS_REFER = 1 << 13  # ABI 2
FS_TRUNCATE = 1 << 14  # ABI 3
FS_IOCTL_DEV = 1 << 15  # ABI 5
NET_BIND_TCP = 1 << 0  # ABI 4
NET_CONNECT_TCP = 1 << 1
SCOPE_ABSTRACT_UNIX = 1 << 0  # ABI 6
SCOPE_SIGNAL = 1 << 1

READ = FS_EXECUTE | FS_READ_FILE | FS_READ_DIR
FILE_RIGHTS = FS_EXECUTE | FS_WRITE_FILE | FS_READ_FILE | FS_TRUNCATE

#: The only devices a confined process may open, like bubblewrap's fresh ``/dev``: the rest
#: of ``/dev`` gets no grant at all — not the host's terminals (``/dev/pts``, ``/dev/tty``,
#: ``/dev/ptmx``), shared memory (``/dev/shm``), nor a disk, which a process of uid 0 could
#: otherwise read raw past every path rule. (``/dev/fd``, ``/dev/stdin`` … lead into
#: ``/proc`` and keep working.) Granting a short list also keeps the ruleset small.
READABLE_DEVICES = ("/dev/null", "/dev/zero", "/dev/full", "/dev/random", "/dev/urandom")
#: Of those, the ones it may write (output sinks).
WRITABLE_DEVICES = ("/dev/null", "/dev/zero", "/dev/full")
UNREADABLE = tuple(Path(p) for p in ("/dev", "/run/user"))
MARKER = "SNODO_SANDBOX_RUN"


class _RulesetAttr(ctypes.Structure):
    _fields_ = (
        ("handled_access_fs", ctypes.c_uint64),
        ("handled_access_net", ctypes.c_uint64),
        ("scoped", ctypes.c_uint64),
    )


class _PathBeneath(ctypes.Structure):
    _pack_ = 1
    _fields_ = (("allowed_access", ctypes.c_uint64), ("parent_fd", ctypes.c_int32))


def _libc() -> ctypes.CDLL | None:
    if not sys.platform.startswith("linux"):
        return None
    try:
        libc = ctypes.CDLL(None, use_errno=True)
    except OSError:
        return None
    libc.syscall.restype = ctypes.c_long
    return libc


_LIBC = _libc()


def abi_version() -> int:
    """The kernel's Landlock ABI version; 0 when it has none (or it is disabled)."""
    if _LIBC is None:
        return 0
    version = _LIBC.syscall(_SYS_CREATE_RULESET, None, ctypes.c_size_t(0), ctypes.c_uint32(_CREATE_RULESET_VERSION))
    return max(0, int(version))


def _error(what: str) -> EnvironmentProblem:
    err = ctypes.get_errno()
    return EnvironmentProblem(f"Landlock: {what} failed: {os.strerror(err)}")


class Ruleset:
    """An open Landlock ruleset descriptor, built in the parent."""

    def __init__(self, abi: int, *, network: bool) -> None:
        assert _LIBC is not None
        self.abi = abi
        self.fs = (
            FS_ABI1_ALL
            | (FS_REFER if abi >= 2 else 0)
            | (FS_TRUNCATE if abi >= 3 else 0)
            | (FS_IOCTL_DEV if abi >= 5 else 0)  # handled and never granted: no ioctl on devices
        )
        self.network = network
        net = 0 if network or abi < 4 else NET_BIND_TCP | NET_CONNECT_TCP
        scoped = SCOPE_ABSTRACT_UNIX | SCOPE_SIGNAL if abi >= 6 else 0
        attr = _RulesetAttr(self.fs, net, scoped)
        size = 8 if abi < 4 else 16 if abi < 6 else 24
        fd = _LIBC.syscall(_SYS_CREATE_RULESET, ctypes.byref(attr), ctypes.c_size_t(size), ctypes.c_uint32(0))
        if fd < 0:
            raise _error("creating a ruleset")
        self.fd = int(fd)

    def allow(self, path: Path, access: int) -> None:
        try:
            target = os.open(path, os.O_PATH | os.O_CLOEXEC)
        except OSError:
            return  # vanished or unreadable: nothing to grant
        try:
            rights = access & self.fs
            if not stat.S_ISDIR(os.fstat(target).st_mode):
                rights &= FILE_RIGHTS
            rule = _PathBeneath(rights, target)
            assert _LIBC is not None
            if (
                _LIBC.syscall(
                    _SYS_ADD_RULE,
                    ctypes.c_int(self.fd),
                    ctypes.c_int(_RULE_PATH_BENEATH),
                    ctypes.byref(rule),
                    ctypes.c_uint32(0),
                )
                < 0
            ):
                raise _error(f"granting access to {path}")
        finally:
            os.close(target)

    def close(self) -> None:
        with contextlib.suppress(OSError):
            os.close(self.fd)

    def restrict_in_child(self, limits: Limits | None = None) -> Callable[[], None]:
        """The ``preexec_fn``: resource limits, ``no_new_privs``, no capabilities, the seccomp
        filter (with the socket rules when the network is off, :mod:`snodo.sandbox.harden`),
        then the ruleset.
        Everything it needs is bound now, nothing is imported there."""
        libc, fd = _LIBC, self.fd
        assert libc is not None
        prctl, syscall = libc.prctl, libc.syscall
        one, zero, sigkill = ctypes.c_ulong(1), ctypes.c_ulong(0), ctypes.c_ulong(signal.SIGKILL)
        c_fd, c_flags = ctypes.c_int(fd), ctypes.c_uint32(0)
        set_limits = limit_setter(limits) if limits is not None else None
        harden = Hardening(libc, filter_sockets=not self.network).in_child()

        def restrict() -> None:
            prctl(_PR_SET_PDEATHSIG, sigkill, zero, zero, zero)
            if set_limits is not None:
                set_limits()
            if prctl(_PR_SET_NO_NEW_PRIVS, one, zero, zero, zero) != 0:
                raise OSError(ctypes.get_errno(), "prctl(PR_SET_NO_NEW_PRIVS) failed")
            harden()
            if syscall(_SYS_RESTRICT_SELF, c_fd, c_flags) != 0:
                raise OSError(ctypes.get_errno(), "landlock_restrict_self failed")

        return restrict


_CARVED: dict[tuple[Path, tuple[Path, ...]], tuple[tuple[int, ...], list[Path]]] = {}


def _carved(root: Path, excluded: Sequence[Path]) -> list[Path]:
    """:func:`carve`, cached until one of the directories it listed changes (a directory's
    modification time changes whenever an entry is added, removed or renamed in it)."""
    key = (root, tuple(e for e in excluded if e != Path("/")))
    listed = sorted({p for e in key[1] for p in e.parents if p == root or root in p.parents})
    stamps = []
    for directory in listed:
        try:
            stamps.append(os.stat(directory).st_mtime_ns)
        except OSError:
            stamps.append(-1)
    cached = _CARVED.get(key)
    if cached is not None and cached[0] == tuple(stamps):
        return cached[1]
    carved = carve(root, list(key[1]))
    if len(_CARVED) > 64:
        _CARVED.clear()
    _CARVED[key] = (tuple(stamps), carved)
    return carved


def build_ruleset(policy: SandboxPolicy, tmpdir: Path, abi: int) -> Ruleset:
    workspace = resolved(policy.workspace)
    if not policy.network and abi < 4:
        raise EnvironmentProblem(
            f"Landlock ABI {abi} on this kernel cannot refuse network access (ABI 4, Linux 6.7, can)",
            hint="use the bubblewrap backend, or a newer kernel; see docs/security.md",
        )
    hidden = policy.hidden_paths()
    ruleset = Ruleset(abi, network=policy.network)
    try:
        for root in _carved(Path("/"), (*hidden, *UNREADABLE)):
            ruleset.allow(root, READ)
        for root in _carved(workspace, hidden):
            ruleset.allow(root, READ)
        kept = [*read_only_paths(workspace, policy.read_only), *interpreter_dirs(policy), *hidden]
        for root in _carved(workspace, kept):
            ruleset.allow(root, ruleset.fs)
        ruleset.allow(tmpdir, ruleset.fs)
        for extra in policy.writable:
            ruleset.allow(extra, ruleset.fs)
        for device in READABLE_DEVICES:
            if os.path.exists(device):
                writable = FS_WRITE_FILE | FS_TRUNCATE if device in WRITABLE_DEVICES else 0
                ruleset.allow(Path(device), READ | writable)
    except BaseException:
        ruleset.close()
        raise
    return ruleset


def _ticks_now() -> int:
    """Now, in the clock ticks since boot that ``/proc/<pid>/stat`` start times use."""
    try:
        with open("/proc/uptime") as fh:
            uptime = float(fh.read().split()[0])
    except (OSError, ValueError, IndexError):
        return 0
    return int(uptime * os.sysconf("SC_CLK_TCK"))


def kill_marked(marker: str, leader: int, since: int = 0, others: Collection[int] = ()) -> int:
    """Kill every process of the run: same process group or session as ``leader``, carrying
    ``marker`` in its environment, or — since snodo is the child subreaper — an orphan
    reparented to snodo that runs confined (:func:`~snodo.sandbox.base.confined`: snodo's own
    children do not) and is no leader of another live run (``others``). Only processes
    started at or after ``since`` (clock ticks since boot) can belong to the run. Killed
    orphans are reaped. Returns how many were signalled."""
    needle, prefix = f"{MARKER}={marker}".encode(), f"{MARKER}=".encode()
    me = os.getpid()
    killed = 0
    for _ in range(5):  # a forking process may add children while we sweep
        found = 0
        orphans = []
        try:
            names = os.listdir("/proc")
        except OSError:
            return killed
        for name in names:
            if not name.isdigit() or int(name) in (me, 1):
                continue
            pid = int(name)
            try:
                with open(f"/proc/{pid}/stat", "rb") as fh:
                    fields = fh.read().rsplit(b")", 1)[1].split()
                state, ppid, pgrp, session = fields[0], int(fields[1]), int(fields[2]), int(fields[3])
                started = int(fields[19])
            except (OSError, IndexError, ValueError):
                continue
            if started < since or pid in others:
                continue
            orphan = ppid == me and pid != leader and confined(pid)
            if orphan:
                orphans.append(pid)
            if state in (b"Z", b"X"):
                continue
            hit = leader in (pgrp, session)
            if not hit:
                try:
                    with open(f"/proc/{pid}/environ", "rb") as fh:
                        environ = fh.read().split(b"\0")
                except OSError:
                    continue
                # An orphan marked by another live run is that run's to kill.
                hit = needle in environ or (orphan and not any(e.startswith(prefix) for e in environ))
            if hit:
                with contextlib.suppress(OSError):
                    os.kill(pid, signal.SIGKILL)
                    found += 1
        for pid in orphans:
            with contextlib.suppress(ChildProcessError, OSError):
                os.waitpid(pid, 0)
        killed += found
        if not found:
            break
    return killed


def _reap(marker: str, since: int, leader: int, others: Collection[int]) -> int:
    return kill_marked(marker, leader, since, others)


class LandlockBackend(Backend):
    name = "landlock"

    def __init__(self) -> None:
        self.abi = abi_version()

    def probe(self) -> str | None:
        if not sys.platform.startswith("linux"):
            return f"Landlock is a Linux feature (this is {platform.system()})"
        if self.abi < 1:
            return "the kernel has no Landlock (it needs Linux 5.13+ with Landlock enabled in the LSM list)"
        try:
            ruleset = Ruleset(self.abi, network=False)
        except EnvironmentProblem as exc:
            return exc.message
        try:
            ruleset.allow(Path("/"), READ)
            done = subprocess.run(
                [shutil.which("true") or "/bin/true"],
                capture_output=True,
                timeout=15,
                preexec_fn=ruleset.restrict_in_child(),
            )
        except subprocess.SubprocessError as exc:
            return f"a Landlock-restricted process could not start: {exc}"
        except (OSError, EnvironmentProblem) as exc:
            return f"a Landlock-restricted process could not start: {exc}"
        finally:
            ruleset.close()
        if done.returncode != 0:
            return f"a Landlock-restricted trivial process exited with {done.returncode}"
        return None

    def prepare(
        self, argv: Sequence[str], *, cwd: Path, env: Mapping[str, str], policy: SandboxPolicy, tmpdir: Path
    ) -> Prepared:
        if policy.overlay is not None:  # fails closed: the workspace would be written itself
            raise EnvironmentProblem("cannot confine with Landlock: it has no overlay of a workspace (bubblewrap has)")
        ruleset = build_ruleset(policy, tmpdir, self.abi)
        marker = secrets.token_hex(8)
        since = max(0, _ticks_now() - 1)
        try:
            restrict = ruleset.restrict_in_child(policy.limits)
        except BaseException:
            ruleset.close()
            raise
        return Prepared(
            backend=self.name,
            argv=tuple(argv),
            env={**env, MARKER: marker},
            preexec_fn=restrict,
            reap=functools.partial(_reap, marker, since),
            cleanup=ruleset.close,
        )
