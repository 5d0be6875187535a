"""Which of SPEC §9's guarantees a backend cannot give here, in words (``snodo doctor``,
``protocol check``, the ``confinement`` audit event)."""

from __future__ import annotations

import os

from snodo.base.errors import EnvironmentProblem
from snodo.sandbox import cgroup
from snodo.sandbox.harden import supported as seccomp_supported
from snodo.sandbox.landlock import abi_version


def missing(backend: str) -> list[str]:
    """The guarantees ``backend`` does not give on this machine, for this user."""
    gaps = []
    if not seccomp_supported():
        gaps.append(
            "the seccomp filter that keeps confined code away from the sandbox's own processes: "
            "none for this CPU architecture (confined calls are refused)"
        )
    if os.getuid() == 0 and not cgroup.available():
        gaps.append("process count limit: the kernel never applies RLIMIT_NPROC to root, and no pids cgroup")
    if backend == "landlock":
        abi = abi_version()
        if abi < 5:
            gaps.append(f"ioctl on devices: Landlock ABI {abi} cannot refuse it (ABI 5, Linux 6.10, can)")
        if abi < 6:
            gaps.append(f"signals to host processes: Landlock ABI {abi} cannot scope them (ABI 6, Linux 6.12, can)")
        gaps += [
            "with network on (a coder that needs it): host UNIX sockets and TCP/UDP are reachable",
            "no private /dev/shm or terminals: programs that need POSIX shared memory or a pty fail",
            "no new entries directly in the workspace root (subdirectories are fully writable)",
        ]
    elif backend == "bwrap":
        gaps.append("with network on (a coder that needs it): abstract UNIX sockets of the host are reachable")
    return gaps


def here() -> tuple[str | None, list[str]]:
    """The backend that would confine here (``None``: none works) and what it cannot give."""
    from snodo.sandbox.choose import choose_backend  # noqa: PLC0415 the backend probe only for doctor and protocol check

    try:
        name = choose_backend().name
    except EnvironmentProblem as exc:
        return None, [f"no confinement at all: {exc.message}"]
    return name, missing(name)
