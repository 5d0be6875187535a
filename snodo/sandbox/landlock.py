"""Landlock (Linux ≥ 5.13): the ruleset is built in snodo's process, the child restricts
itself in ``preexec_fn``; the grants are laid out around what must stay out of reach
(``layout.carve``). docs/security.md ("Backends") says what that costs."""

from __future__ import annotations

import contextlib
import ctypes
import functools
import os
import resource
import secrets
import signal
import stat
import struct
import subprocess
import time
from collections.abc import Callable, Collection, Mapping, Sequence
from pathlib import Path

from snodo.base.errors import EnvironmentProblem
from snodo.sandbox.base import Prepared, ProcStat, confined, libc, processes, run_true
from snodo.sandbox.harden import encoded, program
from snodo.sandbox.layout import carve, mtime, read_only_paths, remembered
from snodo.sandbox.policy import Limits, SandboxPolicy, interpreter_dirs, resolved, rlimit_values

# System call numbers (the same on every architecture that has Landlock).
_SYS_CREATE_RULESET, _SYS_ADD_RULE, _SYS_RESTRICT_SELF = 444, 445, 446
_CREATE_RULESET_VERSION = 1
_RULE_PATH_BENEATH = 1
_PR_SET_NO_NEW_PRIVS = 38
_PR_SET_PDEATHSIG = 1
_PR_CAPBSET_DROP = 24
_PR_SET_SECUREBITS = 28
_PR_SET_SECCOMP = 22  # SECCOMP_MODE_FILTER: 2
_PR_CAP_AMBIENT, _PR_CAP_AMBIENT_CLEAR_ALL = 47, 4
# SECBIT_NOROOT, NO_SETUID_FIXUP, KEEP_CAPS_LOCKED, NO_CAP_AMBIENT_RAISE and their locks.
_SECUREBITS = 0x01 | 0x02 | 0x04 | 0x08 | 0x20 | 0x40 | 0x80
_CAP_VERSION_3 = 0x20080522

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

#: The filesystem rights a ruleset handles, by the ABI that added them (ioctl never granted).
_FS_HANDLED = ((1, FS_ABI1_ALL), (2, FS_REFER), (3, FS_TRUNCATE), (5, FS_IOCTL_DEV))
READ = FS_EXECUTE | FS_READ_FILE | FS_READ_DIR
FILE_RIGHTS = FS_EXECUTE | FS_WRITE_FILE | FS_READ_FILE | FS_TRUNCATE

#: The only devices a confined process may open, like bubblewrap's fresh ``/dev`` (no host
#: terminal, no ``/dev/shm``, no disk uid 0 could read raw past every path rule).
_DEVICES = tuple((Path(f"/dev/{name}"), READ | FS_WRITE_FILE | FS_TRUNCATE) for name in ("null", "zero", "full"))
_DEVICES += tuple((Path(f"/dev/{name}"), READ) for name in ("random", "urandom"))
UNREADABLE = tuple(Path(p) for p in ("/dev", "/run/user"))
MARKER = "SNODO_SANDBOX_RUN"


class _RulesetAttr(ctypes.Structure):
    _fields_ = (
        ("handled_access_fs", ctypes.c_uint64),
        ("handled_access_net", ctypes.c_uint64),
        ("scoped", ctypes.c_uint64),
    )


class _SockFprog(ctypes.Structure):
    _fields_ = (("len", ctypes.c_uint16), ("filter", ctypes.POINTER(ctypes.c_char)))


class _PathBeneath(ctypes.Structure):
    _pack_ = 1
    _fields_ = (("allowed_access", ctypes.c_uint64), ("parent_fd", ctypes.c_int32))


_LIBC = libc()


def abi_version() -> int:
    """The kernel's Landlock ABI version; 0 when it has none (or it is disabled)."""
    if _LIBC is None:
        return 0
    version = _LIBC.syscall(_SYS_CREATE_RULESET, None, ctypes.c_size_t(0), ctypes.c_uint32(_CREATE_RULESET_VERSION))
    return max(0, int(version))


class Ruleset:
    """An open Landlock ruleset descriptor, built in the parent."""

    def __init__(self, abi: int, *, network: bool) -> None:
        assert _LIBC is not None
        self.fs = sum(bits for since, bits in _FS_HANDLED if abi >= since)
        self.network = network
        net = 0 if network or abi < 4 else NET_BIND_TCP | NET_CONNECT_TCP
        scoped = SCOPE_ABSTRACT_UNIX | SCOPE_SIGNAL if abi >= 6 else 0
        size = 8 if abi < 4 else 16 if abi < 6 else 24  # the fields this ABI knows
        attr = ctypes.byref(_RulesetAttr(self.fs, net, scoped))
        fd = _LIBC.syscall(_SYS_CREATE_RULESET, attr, ctypes.c_size_t(size), ctypes.c_uint32(0))
        if fd < 0:
            raise EnvironmentProblem(f"Landlock: creating a ruleset failed: {os.strerror(ctypes.get_errno())}")
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
            rule = ctypes.byref(_PathBeneath(rights, target))
            assert _LIBC is not None
            fd, kind = ctypes.c_int(self.fd), ctypes.c_int(_RULE_PATH_BENEATH)
            if _LIBC.syscall(_SYS_ADD_RULE, fd, kind, rule, ctypes.c_uint32(0)) < 0:
                raise EnvironmentProblem(
                    f"Landlock: granting access to {path} failed: {os.strerror(ctypes.get_errno())}"
                )
        finally:
            os.close(target)

    def close(self) -> None:
        with contextlib.suppress(OSError):
            os.close(self.fd)

    def restrict_in_child(self, limits: Limits | None = None) -> Callable[[], None]:
        """The ``preexec_fn``: resource limits, ``no_new_privs``, no capability (bounding set,
        ambient, effective/permitted/inheritable, root's exec-time grant via securebits), the
        seccomp filter, then the ruleset; everything bound now, nothing imported in the child."""
        libc = _LIBC
        assert libc is not None
        rows = program(filter_sockets=not self.network)  # EnvironmentProblem on an unknown machine
        fprog = ctypes.byref(_SockFprog(len(rows), ctypes.create_string_buffer(encoded(rows))))
        header = ctypes.create_string_buffer(struct.pack("=Ii", _CAP_VERSION_3, 0))
        data = ctypes.create_string_buffer(24)  # two of {effective, permitted, inheritable}: all empty
        try:
            with open("/proc/sys/kernel/cap_last_cap") as fh:
                last_cap = int(fh.read())
        except (OSError, ValueError):
            last_cap = 63
        prctl, syscall, capset, setrlimit = libc.prctl, libc.syscall, libc.capset, resource.setrlimit
        rlimits = [(res, (value, value)) for res, _, value in rlimit_values(limits)] if limits is not None else []
        one, zero, sigkill = ctypes.c_ulong(1), ctypes.c_ulong(0), ctypes.c_ulong(signal.SIGKILL)
        c_fd, c_flags = ctypes.c_int(self.fd), ctypes.c_uint32(0)
        caps = [ctypes.c_ulong(c) for c in range(last_cap + 1)]
        c_drop, c_bits = ctypes.c_int(_PR_CAPBSET_DROP), ctypes.c_int(_PR_SET_SECUREBITS)
        c_amb, clear = ctypes.c_int(_PR_CAP_AMBIENT), ctypes.c_ulong(_PR_CAP_AMBIENT_CLEAR_ALL)
        bits, c_seccomp, mode = ctypes.c_ulong(_SECUREBITS), ctypes.c_int(_PR_SET_SECCOMP), ctypes.c_ulong(2)

        def restrict() -> None:
            prctl(_PR_SET_PDEATHSIG, sigkill, zero, zero, zero)
            for res, pair in rlimits:
                setrlimit(res, pair)
            if prctl(_PR_SET_NO_NEW_PRIVS, one, zero, zero, zero) != 0:
                raise OSError(ctypes.get_errno(), "prctl(PR_SET_NO_NEW_PRIVS) failed")
            for cap in caps:  # needs CAP_SETPCAP: fails harmlessly when snodo is not root
                prctl(c_drop, cap, zero, zero, zero)
            prctl(c_bits, bits, zero, zero, zero)
            prctl(c_amb, clear, zero, zero, zero)
            if capset(header, data) != 0:
                raise OSError(ctypes.get_errno(), "capset failed")
            if prctl(c_seccomp, mode, fprog, zero, zero) != 0:
                raise OSError(ctypes.get_errno(), "installing the seccomp filter failed")
            if syscall(_SYS_RESTRICT_SELF, c_fd, c_flags) != 0:
                raise OSError(ctypes.get_errno(), "landlock_restrict_self failed")

        return restrict


_CARVED: dict[tuple[Path, tuple[Path, ...]], tuple[tuple[int, ...], list[Path]]] = {}


def _carved(root: Path, excluded: Sequence[Path]) -> list[Path]:
    """:func:`carve`, cached until one of the directories it listed changes (its mtime)."""
    key = (root, tuple(e for e in excluded if e != Path("/")))
    listed = sorted({p for e in key[1] for p in e.parents if p.is_relative_to(root)})
    return remembered(_CARVED, key, tuple(mtime(d) for d in listed), lambda: carve(root, list(key[1])))


def kill_marked(marker: str, since: int, leader: int, others: Collection[int]) -> None:
    """Kill (and reap, if orphans) the processes of the run started since ``since`` (clock
    ticks since boot): same process group or session as ``leader``, carrying ``marker`` in
    their environment, or confined orphans adopted by snodo that lead no other live run."""
    needle, skip = f"{MARKER}={marker}".encode(), {os.getpid(), 1, *others}
    for _ in range(5):  # a forking process may add children while we sweep
        if not _sweep(needle, since, leader, skip):
            return


def _sweep(needle: bytes, since: int, leader: int, skip: Collection[int]) -> int:
    me = os.getpid()
    found = 0
    orphans = []
    for proc in processes():
        if proc.pid in skip or proc.started < since:
            continue
        orphan = proc.ppid == me and proc.pid != leader and confined(proc.pid)
        if orphan:
            orphans.append(proc.pid)
        if proc.state not in (b"Z", b"X") and _of_run(proc, leader, needle, orphan):
            with contextlib.suppress(OSError):
                os.kill(proc.pid, signal.SIGKILL)
                found += 1
    for pid in orphans:
        with contextlib.suppress(ChildProcessError, OSError):
            os.waitpid(pid, 0)
    return found


def _of_run(proc: ProcStat, leader: int, needle: bytes, orphan: bool) -> bool:
    if leader in (proc.pgrp, proc.session):
        return True
    try:
        with open(f"/proc/{proc.pid}/environ", "rb") as fh:
            environ = fh.read().split(b"\0")
    except OSError:
        return False
    # An orphan marked by another live run is that run's to kill.
    return needle in environ or (orphan and not any(e.startswith(f"{MARKER}=".encode()) for e in environ))


class LandlockBackend:
    name = "landlock"

    def __init__(self) -> None:
        self.abi = abi_version()

    def probe(self) -> str | None:
        if self.abi < 1:  # elsewhere than Linux too
            return "the kernel has no Landlock (it needs Linux 5.13+ with Landlock enabled in the LSM list)"
        try:
            ruleset = Ruleset(self.abi, network=False)
        except EnvironmentProblem as exc:
            return exc.message
        try:
            ruleset.allow(Path("/"), READ)
            done = run_true([], preexec_fn=ruleset.restrict_in_child())
        except (subprocess.SubprocessError, OSError, EnvironmentProblem) as exc:
            return f"a Landlock-restricted process could not start: {exc}"
        finally:
            ruleset.close()
        if done.returncode != 0:
            return f"a Landlock-restricted trivial process exited with {done.returncode}"
        return None

    def overlays(self, where: Path) -> bool:
        return False

    def prepare(
        self,
        argv: Sequence[str],
        *,
        cwd: Path,
        env: Mapping[str, str],
        policy: SandboxPolicy,
        tmpdir: Path,
        cleanups: contextlib.ExitStack,
    ) -> Prepared:
        if policy.overlay is not None:  # fails closed: the workspace would be written itself
            raise EnvironmentProblem("cannot confine with Landlock: it has no overlay of a workspace (bubblewrap has)")
        if not policy.network and self.abi < 4:
            raise EnvironmentProblem(
                f"Landlock ABI {self.abi} on this kernel cannot refuse network access (ABI 4, Linux 6.7, can)",
                hint="use the bubblewrap backend, or a newer kernel; see docs/security.md",
            )
        ruleset = Ruleset(self.abi, network=policy.network)
        cleanups.callback(ruleset.close)
        workspace = resolved(policy.workspace)
        hidden = policy.hidden_paths()
        kept = [*read_only_paths(workspace, policy.read_only), *interpreter_dirs(policy), *hidden]
        grants = [
            *((root, READ) for root in _carved(Path("/"), (*hidden, *UNREADABLE))),
            *((root, READ) for root in _carved(workspace, hidden)),
            *((root, ruleset.fs) for root in (*_carved(workspace, kept), tmpdir, *policy.writable)),
            *_DEVICES,
        ]
        for path, access in grants:
            ruleset.allow(path, access)
        marker = secrets.token_hex(8)
        # now, in the clock ticks since boot of ``/proc/<pid>/stat``'s start times
        ticks = int(time.clock_gettime(time.CLOCK_BOOTTIME) * os.sysconf("SC_CLK_TCK"))
        return Prepared(
            backend=self.name,
            argv=tuple(argv),
            env={**env, MARKER: marker},
            preexec_fn=ruleset.restrict_in_child(policy.limits),
            reap=functools.partial(kill_marked, marker, max(0, ticks - 1)),
        )
