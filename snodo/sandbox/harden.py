"""What every confined process gets besides its backend's own confinement: a seccomp filter
(bubblewrap takes it with ``--seccomp``) and, under Landlock, no capabilities. The filter
keeps confined code away from the sandbox's own processes (``EPERM`` on the calls that act on
another process, another ABI killed); with the network off the Landlock backend adds its
socket rules to the same program, so its child carries one filter more than snodo (see
docs/security.md, which has the list and its costs).
"""

from __future__ import annotations

import ctypes
import errno
import os
import platform
import struct
from collections.abc import Callable

from snodo.base.errors import EnvironmentProblem

#: ``socket()`` families a confined process may still create with the network off.
AF_NETLINK = 16

_LD_W_ABS, _JEQ_K, _JGE_K, _RET_K = 0x20, 0x15, 0x35, 0x06
_RET_ERRNO = 0x00050000
#: What the program's labels return: allow, fail with an errno, or kill the process.
_RETURNS = {
    "allow": 0x7FFF0000,
    "eperm": _RET_ERRNO | errno.EPERM,
    "eacces": _RET_ERRNO | errno.EACCES,
    "kill": 0x80000000,
}
_X32_BIT = 0x40000000
_OFFSET_NR, _OFFSET_ARCH, _OFFSET_ARG0 = 0, 4, 16

#: Per machine: the audit architecture and whether it has the x32 numbers.
_ARCHES: dict[str, tuple[int, bool]] = {"x86_64": (0xC000003E, True), "aarch64": (0xC00000B7, False)}
#: The numbers of the system calls the filter names, on x86_64 and aarch64.
_NUMBERS: dict[str, tuple[int, int]] = {
    "ptrace": (101, 117),
    "process_vm_readv": (310, 270),
    "process_vm_writev": (311, 271),
    "pidfd_open": (434, 434),
    "pidfd_getfd": (438, 438),
    "process_madvise": (440, 440),
    "kcmp": (312, 272),
    "perf_event_open": (298, 241),
    "socket": (41, 198),
    "io_uring_setup": (425, 425),
}
_PROCESS_CALLS = tuple(name for name in _NUMBERS if name not in ("socket", "io_uring_setup"))

Instruction = tuple[int, int, int, int]
#: An instruction whose jumps name a label of :data:`_RETURNS` (``None``: the next instruction).
_Op = tuple[int, str | None, str | None, int]


def supported() -> bool:
    """Whether the filter knows this machine's system call numbers."""
    return platform.machine() in _ARCHES


def _numbers() -> tuple[int, bool, dict[str, int]]:
    machine = platform.machine()
    if machine not in _ARCHES:
        raise EnvironmentProblem(
            f"cannot run a process confined on {machine}: snodo's seccomp filter, which keeps "
            "confined code away from the sandbox's own processes, knows x86_64 and aarch64 only",
            hint="run snodo on x86_64 or aarch64; see docs/security.md",
        )
    column = list(_ARCHES).index(machine)
    return (*_ARCHES[machine], {name: numbers[column] for name, numbers in _NUMBERS.items()})


def program(*, filter_sockets: bool = False) -> list[Instruction]:
    """The classic BPF program: ``(code, jt, jf, k)`` per instruction. ``filter_sockets``:
    ``socket()`` only for ``AF_NETLINK`` and no ``io_uring_setup`` (``EACCES``)."""
    arch, x32, numbers = _numbers()
    ops: list[_Op] = [
        (_LD_W_ABS, None, None, _OFFSET_ARCH),
        (_JEQ_K, None, "kill", arch),
        (_LD_W_ABS, None, None, _OFFSET_NR),
    ]
    if x32:
        ops.append((_JGE_K, "kill", None, _X32_BIT))
    ops += [(_JEQ_K, "eperm", None, numbers[name]) for name in _PROCESS_CALLS]
    if filter_sockets:
        ops += [
            (_JEQ_K, "eacces", None, numbers["io_uring_setup"]),
            (_JEQ_K, None, "allow", numbers["socket"]),
            (_LD_W_ABS, None, None, _OFFSET_ARG0),  # the family: the first argument's low word
            (_JEQ_K, "allow", "eacces", AF_NETLINK),
        ]
    at = {label: len(ops) + i for i, label in enumerate(_RETURNS)}  # the returns end the program

    def offset(label: str | None, index: int) -> int:
        return 0 if label is None else at[label] - index - 1

    rows = [(code, offset(jt, i), offset(jf, i), k) for i, (code, jt, jf, k) in enumerate(ops)]
    return rows + [(_RET_K, 0, 0, k) for k in _RETURNS.values()]


def encoded(rows: list[Instruction]) -> bytes:
    """``struct sock_filter[]`` as the kernel (and bubblewrap's ``--seccomp``) reads it."""
    return b"".join(struct.pack("=HBBI", *row) for row in rows)


def program_fd(*, filter_sockets: bool = False) -> int:
    """A descriptor to read the encoded program from, to end (for bubblewrap's ``--seccomp``;
    bubblewrap reads it once, so each start needs its own). Close-on-exec, so no other child
    of snodo inherits it: the one it is for gets it through ``pass_fds``. The caller closes
    it once the child started."""
    data = encoded(program(filter_sockets=filter_sockets))
    read_end, write_end = os.pipe2(os.O_CLOEXEC)
    try:
        os.write(write_end, data)  # a few hundred bytes: far below a pipe's buffer
    finally:
        os.close(write_end)
    return read_end


_PR_CAPBSET_DROP = 24
_PR_SET_SECUREBITS = 28
_PR_SET_SECCOMP = 22
_PR_CAP_AMBIENT, _PR_CAP_AMBIENT_CLEAR_ALL = 47, 4
_SECCOMP_MODE_FILTER = 2
# SECBIT_NOROOT, NO_SETUID_FIXUP, KEEP_CAPS_LOCKED, NO_CAP_AMBIENT_RAISE and their locks.
_SECUREBITS = 0x01 | 0x02 | 0x04 | 0x08 | 0x20 | 0x40 | 0x80
_CAP_VERSION_3 = 0x20080522


class _SockFprog(ctypes.Structure):
    _fields_ = (("len", ctypes.c_uint16), ("filter", ctypes.POINTER(ctypes.c_char)))


def in_child(libc: ctypes.CDLL, *, filter_sockets: bool) -> Callable[[], None]:
    """The child's part, to run after ``no_new_privs``: drop every capability (bounding set,
    ambient, effective/permitted/inheritable, root's exec-time grant via securebits) and
    install the filter. Everything is bound here: nothing is imported in the child."""
    rows = program(filter_sockets=filter_sockets)  # EnvironmentProblem on an unknown machine
    fprog = _SockFprog(len(rows), ctypes.create_string_buffer(encoded(rows)))  # kept by fprog
    header = ctypes.create_string_buffer(struct.pack("=Ii", _CAP_VERSION_3, 0))
    data = ctypes.create_string_buffer(24)  # two of {effective, permitted, inheritable}: all empty
    try:
        with open("/proc/sys/kernel/cap_last_cap") as fh:
            last_cap = int(fh.read())
    except (OSError, ValueError):
        last_cap = 63
    prctl, capset = libc.prctl, libc.capset
    zero = ctypes.c_ulong(0)
    caps = [ctypes.c_ulong(c) for c in range(last_cap + 1)]
    c_drop, c_bits = ctypes.c_int(_PR_CAPBSET_DROP), ctypes.c_int(_PR_SET_SECUREBITS)
    c_amb = ctypes.c_int(_PR_CAP_AMBIENT)
    bits, clear = ctypes.c_ulong(_SECUREBITS), ctypes.c_ulong(_PR_CAP_AMBIENT_CLEAR_ALL)
    c_seccomp, mode = ctypes.c_int(_PR_SET_SECCOMP), ctypes.c_ulong(_SECCOMP_MODE_FILTER)
    prog = ctypes.byref(fprog)

    def harden() -> None:
        for cap in caps:  # needs CAP_SETPCAP: fails harmlessly when snodo is not root
            prctl(c_drop, cap, zero, zero, zero)
        prctl(c_bits, bits, zero, zero, zero)
        prctl(c_amb, clear, zero, zero, zero)
        if capset(header, data) != 0:
            raise OSError(ctypes.get_errno(), "capset failed")
        if prctl(c_seccomp, mode, prog, zero, zero) != 0:
            raise OSError(ctypes.get_errno(), "installing the seccomp filter failed")

    return harden
