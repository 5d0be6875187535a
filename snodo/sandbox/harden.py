"""What the Landlock backend adds in the child besides the Landlock ruleset: no capabilities
(snodo may run as root) and, when the network is off, a seccomp filter on ``socket()``.

When snodo runs with ``no_new_privs`` itself (``mark``), a child without the socket filter
gets a filter that allows everything instead: one seccomp filter more than snodo's is how
snodo then tells a confined process (and every descendant of it) from its own children
(:func:`snodo.sandbox.base.confined`).

Landlock covers files and TCP only; the filter closes the rest when the network is off:
``socket()`` is allowed for ``AF_NETLINK`` (interface queries) only, so UDP, MPTCP
(``AF_INET`` with ``IPPROTO_MPTCP``), raw and packet sockets and — because Landlock does not
govern ``connect()`` to a socket file — ``AF_UNIX`` sockets that could reach a host service
(ssh-agent, tmux, Docker) are all refused with ``EACCES``. ``socketpair()`` is a different
system call and keeps working (asyncio, multiprocessing pipes). ``io_uring_setup`` is refused
because io_uring can open sockets without the ``socket()`` system call. Everything is built
once in the parent; the child only makes a few ``prctl``/``capset`` calls.
"""

from __future__ import annotations

import ctypes
import errno
import platform
from collections.abc import Callable

_PR_CAPBSET_DROP = 24
_PR_SET_SECUREBITS = 28
_PR_SET_SECCOMP = 22
_PR_CAP_AMBIENT, _PR_CAP_AMBIENT_CLEAR_ALL = 47, 4
_SECCOMP_MODE_FILTER = 2
# SECBIT_NOROOT, NO_SETUID_FIXUP, KEEP_CAPS_LOCKED, NO_CAP_AMBIENT_RAISE and their locks.
_SECUREBITS = 0x01 | 0x02 | 0x04 | 0x08 | 0x20 | 0x40 | 0x80
_CAP_VERSION_3 = 0x20080522
AF_NETLINK = 16

#: (AUDIT_ARCH, __NR_socket, __NR_io_uring_setup) of the architectures the filter knows.
_ARCHES = {"x86_64": (0xC000003E, 41, 425), "aarch64": (0xC00000B7, 198, 425)}


class _SockFilter(ctypes.Structure):
    _fields_ = (("code", ctypes.c_uint16), ("jt", ctypes.c_uint8), ("jf", ctypes.c_uint8), ("k", ctypes.c_uint32))


class _SockFprog(ctypes.Structure):
    _fields_ = (("len", ctypes.c_uint16), ("filter", ctypes.POINTER(_SockFilter)))


class _CapHeader(ctypes.Structure):
    _fields_ = (("version", ctypes.c_uint32), ("pid", ctypes.c_int))


class _CapData(ctypes.Structure):
    _fields_ = (("effective", ctypes.c_uint32), ("permitted", ctypes.c_uint32), ("inheritable", ctypes.c_uint32))


def _program(arch: int, nr_socket: int, nr_io_uring: int) -> list[tuple[int, int, int, int]]:
    ld, jeq, jge, ret = 0x20, 0x15, 0x35, 0x06
    allow, deny = 0x7FFF0000, 0x00050000 | errno.EACCES
    return [
        (ld, 0, 0, 4),  # 0: A = arch
        (jeq, 0, 7, arch),  # 1: another ABI (i386 socketcall, ...): deny everything
        (ld, 0, 0, 0),  # 2: A = system call number
        (jge, 5, 0, 0x40000000),  # 3: x32 system calls: deny
        (jeq, 4, 0, nr_io_uring),  # 4: io_uring_setup: deny
        (jeq, 0, 2, nr_socket),  # 5: not socket(): allow
        (ld, 0, 0, 16),  # 6: A = low word of the first argument (the family)
        (jeq, 0, 1, AF_NETLINK),  # 7
        (ret, 0, 0, allow),  # 8
        (ret, 0, 0, deny),  # 9
    ]


def seccomp_supported() -> bool:
    return platform.machine() in _ARCHES


class Hardening:
    """Everything the child needs, bound in the parent (nothing is imported or allocated in
    the child between fork and exec)."""

    def __init__(self, libc: ctypes.CDLL, *, filter_sockets: bool, mark: bool = False) -> None:
        self.libc = libc
        self.fprog: _SockFprog | None = None
        if mark and not filter_sockets:  # one filter that allows everything: a mark that stays
            self._filters = (_SockFilter * 1)(_SockFilter(0x06, 0, 0, 0x7FFF0000))
            self.fprog = _SockFprog(1, self._filters)
        if filter_sockets:
            arch = _ARCHES.get(platform.machine())
            if arch is None:
                from snodo.errors import EnvironmentProblem

                raise EnvironmentProblem(
                    f"the Landlock backend cannot refuse network sockets on {platform.machine()} "
                    "(its seccomp filter knows x86_64 and aarch64)",
                    hint="use the bubblewrap backend; see docs/security.md",
                )
            rows = _program(*arch)
            self._filters = (_SockFilter * len(rows))(*(_SockFilter(*row) for row in rows))
            self.fprog = _SockFprog(len(rows), self._filters)
        self.header = _CapHeader(_CAP_VERSION_3, 0)
        self.data = (_CapData * 2)()
        try:
            with open("/proc/sys/kernel/cap_last_cap") as fh:
                self.last_cap = int(fh.read())
        except (OSError, ValueError):
            self.last_cap = 63

    def in_child(self) -> Callable[[], None]:
        """Drop every capability (bounding set, ambient, effective/permitted/inheritable,
        root's exec-time grant via securebits) and, with ``filter_sockets`` (or ``mark``),
        install the filter. Must run after ``no_new_privs``."""
        prctl, capset = self.libc.prctl, self.libc.capset
        zero = ctypes.c_ulong(0)
        caps = [ctypes.c_ulong(c) for c in range(self.last_cap + 1)]
        header, data, fprog = ctypes.byref(self.header), ctypes.byref(self.data), self.fprog
        c_drop, c_bits = ctypes.c_int(_PR_CAPBSET_DROP), ctypes.c_int(_PR_SET_SECUREBITS)
        c_amb = ctypes.c_int(_PR_CAP_AMBIENT)
        bits, clear = ctypes.c_ulong(_SECUREBITS), ctypes.c_ulong(_PR_CAP_AMBIENT_CLEAR_ALL)
        c_seccomp, mode = ctypes.c_int(_PR_SET_SECCOMP), ctypes.c_ulong(_SECCOMP_MODE_FILTER)
        prog = ctypes.byref(fprog) if fprog is not None else None

        def harden() -> None:
            for cap in caps:  # needs CAP_SETPCAP: fails harmlessly when snodo is not root
                prctl(c_drop, cap, zero, zero, zero)
            prctl(c_bits, bits, zero, zero, zero)
            prctl(c_amb, clear, zero, zero, zero)
            if capset(header, data) != 0:
                raise OSError(ctypes.get_errno(), "capset failed")
            if prog is not None and prctl(c_seccomp, mode, prog, zero, zero) != 0:
                raise OSError(ctypes.get_errno(), "installing the seccomp filter failed")

        return harden
