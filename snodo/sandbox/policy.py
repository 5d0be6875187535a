"""What a confined process may touch (SPEC "Confined execution"), and the context that
carries it: ``run_process`` confines every child started inside :func:`confined`."""

from __future__ import annotations

import contextlib
import contextvars
import functools
import os
import resource
import shutil
import stat
import sys
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Literal

from attrs import evolve, field, frozen

from snodo.base.errors import EnvironmentProblem
from snodo.sandbox.layout import mtime, remembered

#: Called with ``(argv, cwd)`` for each process run unconfined (``sandbox: off``), to audit it.
UnconfinedCallback = Callable[[Sequence[str], Path], None]


def _physical_memory() -> int:
    try:
        return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (ValueError, OSError):
        return 0


@frozen(kw_only=True)
class Limits:
    """Per confined process (``execution.limits``), in bytes and processes; 0 means none."""

    file_size: int = 16 << 30
    processes: int = 4096
    memory: int = field(factory=_physical_memory)


def limits_from_protocol(file_size_mb: int, processes: int, memory_mb: int | None) -> Limits:
    """The protocol's ``execution.limits`` (megabytes; memory unset: the machine's)."""
    memory = _physical_memory() if memory_mb is None else memory_mb << 20
    return Limits(file_size=file_size_mb << 20, processes=processes, memory=memory)


_prlimit = functools.cache(functools.partial(shutil.which, "prlimit"))


def _clamped(res: int, value: int) -> int:
    """``value``, or the hard limit when lower (it cannot be raised)."""
    hard = resource.getrlimit(res)[1]
    return value if hard == resource.RLIM_INFINITY or value <= 0 else min(value, hard)


def rlimit_values(limits: Limits) -> list[tuple[int, str, int]]:
    """``(resource, prlimit option, value)`` of each limit not 0 (bubblewrap runs ``prlimit``, Landlock sets them)."""
    values = [
        (resource.RLIMIT_FSIZE, "--fsize", _clamped(resource.RLIMIT_FSIZE, limits.file_size)),
        (resource.RLIMIT_NPROC, "--nproc", _clamped(resource.RLIMIT_NPROC, limits.processes)),
        (resource.RLIMIT_AS, "--as", _clamped(resource.RLIMIT_AS, limits.memory)),
    ]
    return [value for value in values if value[2] > 0]


def limit_prefix(limits: Limits) -> tuple[str, ...]:
    wanted = [(flag, value) for _, flag, value in rlimit_values(limits)]
    if not wanted:
        return ()
    program = _prlimit()
    if program is None:
        raise EnvironmentProblem(
            "cannot apply execution.limits: the util-linux program prlimit is not installed",
            hint="install util-linux, or set every execution.limits entry to 0",
        )
    return (program, *(f"{flag}={value}" for flag, value in wanted), "--")


@frozen(kw_only=True)
class SandboxPolicy:
    """The confinement of one workspace: writable except ``.snodo``, ``.git`` and ``read_only``
    (the protocol's ``protected_paths``); ``hidden`` paths (and ``$SNODO_HOME``) invisible;
    ``writable`` extra directories; everything else read-only. ``mode="off"``: unconfined."""

    workspace: Path
    read_only: tuple[str, ...] = ()
    network: bool = False
    hidden: tuple[Path, ...] = ()
    writable: tuple[Path, ...] = ()
    #: Inherited variables passed besides the allowlist (``execution.env``, :mod:`.environ`).
    env: tuple[str, ...] = ()
    limits: Limits = field(factory=Limits)
    #: The project's interpreter environment(s) (``execution.python``), kept read-only.
    interpreters: tuple[Path, ...] = ()
    mode: Literal["auto", "off"] = "auto"
    #: ``(upper, work)``: the workspace is a private overlay of itself, its writes in ``upper``
    #: (bubblewrap only). ``None``: the workspace itself is writable.
    overlay: tuple[Path, Path] | None = None
    on_unconfined: UnconfinedCallback | None = field(default=None, eq=False, repr=False)
    #: Called with the backend's name before each confined start.
    on_confined: Callable[[str], None] | None = field(default=None, eq=False, repr=False)

    def with_writable(self, paths: Sequence[Path]) -> SandboxPolicy:
        """This policy plus ``paths`` writable: existing directories, none in or above a hidden path."""
        extra: list[Path] = []
        hidden = self.hidden_paths()
        for raw in paths:
            path = Path(os.path.realpath(raw))
            if not path.is_dir():
                raise EnvironmentProblem(f"cannot make {raw} writable in the sandbox: it is not a directory")
            if any(path == h or h in path.parents or path in h.parents for h in hidden):
                raise EnvironmentProblem(f"cannot make {raw} writable in the sandbox: it overlaps a hidden path")
            extra.append(path)
        return evolve(self, writable=(*self.writable, *extra))

    def hidden_paths(self) -> tuple[Path, ...]:
        """The hidden paths, ``$SNODO_HOME`` included, resolved and de-duplicated."""
        return tuple(dict.fromkeys(resolved(raw) for raw in (*self.hidden, configured_home())))


_RESOLVED: dict[str, tuple[tuple[int, int], Path]] = {}


def resolved(raw: str | os.PathLike[str]) -> Path:
    """``os.path.realpath(raw)``, remembered for a directory while ``raw`` leads to the same
    device and inode (a directory has one path, so a swapped component shows)."""
    key = os.fspath(raw)
    with contextlib.suppress(OSError):
        info = os.stat(key)
        if stat.S_ISDIR(info.st_mode):
            return remembered(_RESOLVED, key, (info.st_dev, info.st_ino), lambda: Path(os.path.realpath(key)))
    return Path(os.path.realpath(key))


_INTERPRETERS: dict[tuple[Path, tuple[Path, ...], str], tuple[int, tuple[Path, ...]]] = {}


def interpreter_dirs(policy: SandboxPolicy) -> tuple[Path, ...]:
    """The interpreter environments inside the workspace, kept read-only (no ``.pth`` for the
    next unconfined start); cached until the workspace's top changes."""
    workspace = resolved(policy.workspace)
    key = (workspace, policy.interpreters, os.environ.get("VIRTUAL_ENV", ""))
    return remembered(_INTERPRETERS, key, mtime(workspace), lambda: _find_interpreters(workspace, policy))


def _find_interpreters(workspace: Path, policy: SandboxPolicy) -> tuple[Path, ...]:
    candidates = [Path(sys.prefix), *policy.interpreters, workspace / ".venv", workspace / "venv"]
    if os.environ.get("VIRTUAL_ENV"):
        candidates.append(Path(os.environ["VIRTUAL_ENV"]))
    found: list[Path] = []
    named = {Path(os.path.realpath(p)) for p in policy.interpreters}
    for raw in candidates:
        path = Path(os.path.realpath(raw))
        inside = path != workspace and workspace in path.parents and path not in found and path.is_dir()
        if inside and (path in named or (path / "pyvenv.cfg").is_file()):
            found.append(path)
    return tuple(found)


def configured_home() -> Path:
    """Where ``$SNODO_HOME`` points (the same rule as the state layer), without creating it."""
    configured = os.environ.get("SNODO_HOME", "")
    home = Path(configured).expanduser() if configured else Path.home() / ".snodo"
    return home.absolute()


_CURRENT: contextvars.ContextVar[SandboxPolicy | None] = contextvars.ContextVar("snodo_sandbox_policy", default=None)


#: The policy set by the innermost :func:`confined` block of this context, if any.
current_policy = _CURRENT.get


@contextlib.contextmanager
def confined(policy: SandboxPolicy | None) -> Iterator[SandboxPolicy | None]:
    """Run the block with ``policy`` as the current policy (``None`` leaves it as is)."""
    token = _CURRENT.set(current_policy() if policy is None else policy)
    try:
        yield current_policy()
    finally:
        _CURRENT.reset(token)
