"""The seccomp filter every confined process gets (bubblewrap's ``--seccomp``, installed by
Landlock's child itself): the sandbox's own processes out of reach, another ABI killed; Landlock
with the network off adds its socket rules to it (docs/security.md has the list and its costs)."""

from __future__ import annotations

import errno
import os
import platform
import struct

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
    return platform.machine() in _ARCHES


def program(*, filter_sockets: bool = False) -> list[Instruction]:
    """The classic BPF program: ``(code, jt, jf, k)`` per instruction. ``filter_sockets``:
    ``socket()`` only for ``AF_NETLINK`` and no ``io_uring_setup`` (``EACCES``)."""
    machine = platform.machine()
    if machine not in _ARCHES:
        raise EnvironmentProblem(
            f"cannot run a process confined on {machine}: snodo's seccomp filter, which keeps "
            "confined code away from the sandbox's own processes, knows x86_64 and aarch64 only",
            hint="run snodo on x86_64 or aarch64; see docs/security.md",
        )
    (arch, x32), column = _ARCHES[machine], list(_ARCHES).index(machine)
    numbers = {name: pair[column] for name, pair in _NUMBERS.items()}
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


def program_fd() -> int:
    """A close-on-exec pipe holding the encoded program (bubblewrap's ``--seccomp`` reads it: one per start)."""
    data = encoded(program())
    read_end, write_end = os.pipe2(os.O_CLOEXEC)
    try:
        os.write(write_end, data)  # a few hundred bytes: far below a pipe's buffer
    finally:
        os.close(write_end)
    return read_end
