"""What a confined process may touch (SPEC "Confined execution"), and the context that
carries it: the core sets a :class:`SandboxPolicy` with :func:`confined` around code that
runs agent-written content, and ``run_process`` confines every child started there.
"""

from __future__ import annotations

import contextlib
import contextvars
import os
import stat
import sys
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Literal

from attrs import evolve, field, frozen

from snodo.base.errors import EnvironmentProblem
from snodo.sandbox.layout import mtime, remembered

#: Called once per process run *unconfined* because the protocol says ``sandbox: off``:
#: ``(argv, cwd)``. The core's callback writes an ``unconfined_execution`` audit event.
UnconfinedCallback = Callable[[Sequence[str], Path], None]
#: Called before each confined start with the backend's name (the core records, once per
#: backend, which one confined the run and the guarantees it cannot give).
ConfinedCallback = Callable[[str], None]


def _physical_memory() -> int:
    try:
        return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (ValueError, OSError):
        return 0


@frozen(kw_only=True)
class Limits:
    """Per confined process (``execution.limits``), in bytes and processes; 0 means none.
    The defaults never bother a normal test suite (AddressSanitizer needs ``memory_mb: 0``)."""

    file_size: int = 16 << 30
    processes: int = 4096
    memory: int = field(factory=_physical_memory)


def limits_from_protocol(file_size_mb: int, processes: int, memory_mb: int | None) -> Limits:
    """The protocol's ``execution.limits`` (megabytes; memory unset: the machine's)."""
    memory = _physical_memory() if memory_mb is None else memory_mb << 20
    return Limits(file_size=file_size_mb << 20, processes=processes, memory=memory)


@frozen(kw_only=True)
class SandboxPolicy:
    """The confinement of one workspace.

    ``workspace`` is writable except ``.snodo``, ``.git`` and the ``read_only`` entries
    (workspace-relative paths or globs: the protocol's ``protected_paths``); ``hidden`` paths
    are not visible at all (``$SNODO_HOME`` is always added); everything else is read-only.
    ``mode="off"`` runs unconfined and reports every such run to ``on_unconfined``.
    ``writable`` names extra existing directories the confined program may write (a coder's
    private state directory, made for one run); none may lie in a hidden path.
    """

    workspace: Path
    read_only: tuple[str, ...] = ()
    network: bool = False
    hidden: tuple[Path, ...] = ()
    writable: tuple[Path, ...] = ()
    #: Inherited environment variables confined processes may see besides the allowlist
    #: (the protocol's ``execution.env``; see :mod:`snodo.sandbox.environ`).
    env: tuple[str, ...] = ()
    limits: Limits = field(factory=Limits)
    #: The project's interpreter environment(s) (``execution.python``), kept read-only.
    interpreters: tuple[Path, ...] = ()
    mode: Literal["auto", "off"] = "auto"
    #: ``(upper, work)``: the workspace is a private overlay of itself (bubblewrap only):
    #: confined code sees it writable, its writes land in ``upper`` and the workspace's own
    #: files are never written. ``None``: the workspace itself is writable.
    overlay: tuple[Path, Path] | None = None
    on_unconfined: UnconfinedCallback | None = field(default=None, eq=False, repr=False)
    on_confined: ConfinedCallback | None = field(default=None, eq=False, repr=False)

    def with_writable(self, paths: Sequence[Path]) -> SandboxPolicy:
        """This policy plus ``paths`` writable; refuses a path that is not an existing
        directory or that lies in (or holds) a hidden path such as ``$SNODO_HOME``."""

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
        found: list[Path] = []
        for raw in (*self.hidden, configured_home()):
            path = resolved(raw)
            if path not in found:
                found.append(path)
        return tuple(found)


_RESOLVED: dict[str, tuple[int, int, Path]] = {}


def resolved(raw: str | os.PathLike[str]) -> Path:
    """``os.path.realpath(raw)``, remembered for a directory while ``raw`` still leads to the
    same device and inode (a directory has one path, so a swapped component shows)."""
    key = os.fspath(raw)
    try:
        info = os.stat(key)
    except OSError:
        return Path(os.path.realpath(key))
    cached = _RESOLVED.get(key)
    if cached is not None and cached[:2] == (info.st_dev, info.st_ino):
        return cached[2]
    path = Path(os.path.realpath(key))
    if stat.S_ISDIR(info.st_mode):
        if len(_RESOLVED) > 256:
            _RESOLVED.clear()
        _RESOLVED[key] = (info.st_dev, info.st_ino, path)
    return path


def _is_venv(path: Path) -> bool:
    return (path / "pyvenv.cfg").is_file()


_INTERPRETERS: dict[tuple[Path, tuple[Path, ...], str], tuple[int, tuple[Path, ...]]] = {}


def interpreter_dirs(policy: SandboxPolicy) -> tuple[Path, ...]:
    """The interpreter environments inside the workspace, which stay read-only there (no
    ``.pth`` file, no replaced ``python`` for the next unconfined start): the one snodo runs
    from, the policy's ``interpreters``, ``$VIRTUAL_ENV``, and the workspace's ``.venv`` /
    ``venv`` when they are virtual environments. Cached until the workspace's top changes."""
    workspace = resolved(policy.workspace)
    key = (workspace, policy.interpreters, os.environ.get("VIRTUAL_ENV", ""))
    return remembered(_INTERPRETERS, key, mtime(workspace), lambda: _find_interpreters(workspace, policy))


def _find_interpreters(workspace: Path, policy: SandboxPolicy) -> tuple[Path, ...]:
    candidates = [Path(sys.prefix), *policy.interpreters, workspace / ".venv", workspace / "venv"]
    if os.environ.get("VIRTUAL_ENV"):
        candidates.append(Path(os.environ["VIRTUAL_ENV"]))
    found: list[Path] = []
    for raw in candidates:
        path = Path(os.path.realpath(raw))
        inside = path != workspace and workspace in path.parents and path not in found and path.is_dir()
        if inside and (path in (Path(os.path.realpath(p)) for p in policy.interpreters) or _is_venv(path)):
            found.append(path)
    return tuple(found)


def configured_home() -> Path:
    """Where ``$SNODO_HOME`` points (the same rule as the state layer), without creating it."""
    configured = os.environ.get("SNODO_HOME", "")
    home = Path(configured).expanduser() if configured else Path.home() / ".snodo"
    return home.absolute()


_CURRENT: contextvars.ContextVar[SandboxPolicy | None] = contextvars.ContextVar("snodo_sandbox_policy", default=None)


def current_policy() -> SandboxPolicy | None:
    """The policy set by the innermost :func:`confined` block of this context, if any."""
    return _CURRENT.get()


@contextlib.contextmanager
def confined(policy: SandboxPolicy | None) -> Iterator[SandboxPolicy | None]:
    """Run the block with ``policy`` as the current policy (``None`` leaves it as is); a
    thread sees it only when started with a copy of the context."""
    if policy is None:
        yield current_policy()
        return
    token = _CURRENT.set(policy)
    try:
        yield policy
    finally:
        _CURRENT.reset(token)
