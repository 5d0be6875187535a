"""How a child process of :mod:`snodo.process.runner` is prepared: its working directory
checked, its environment made and, with a sandbox policy, its confinement."""

from __future__ import annotations

import os
import shutil
from collections.abc import Callable, Collection, Mapping, Sequence
from pathlib import Path

from attrs import evolve

from snodo.base.errors import EnvironmentProblem
from snodo.sandbox import Prepared, SandboxPolicy, choose_backend
from snodo.sandbox.base import hold_adoption
from snodo.sandbox.cgroup import PidGroup, pid_group, release
from snodo.sandbox.environ import confined_environment, discard_private_dir, make_private_dir
from snodo.sandbox.policy import resolved


def shown(path: object, limit: int = 120) -> str:
    text = str(path)
    return text if len(text) <= limit else f"{text[:limit]}… ({len(text)} characters)"


def _confine(
    argv: Sequence[str],
    cwd: Path,
    env: dict[str, str],
    policy: SandboxPolicy,
    pass_env: Sequence[str],
) -> tuple[Prepared, Path | None]:
    real, workspace = resolved(cwd), resolved(policy.workspace)
    inside_workspace = real == workspace or str(real).startswith(f"{workspace}/")
    if not inside_workspace and any(h == real or str(real).startswith(f"{h}/") for h in policy.hidden_paths()):
        raise EnvironmentProblem(
            f"cannot run {shown(argv[0])!r} confined: its working directory {shown(cwd)} is hidden from "
            f"confined processes (it is in snodo's state directory, outside the workspace {shown(workspace)})"
        )
    backend = choose_backend()
    if policy.on_confined is not None:
        policy.on_confined(backend.name)
    tmpdir = make_private_dir()
    # From here until the run is released snodo is the child subreaper: bubblewrap's init
    # outlives its monitor by a moment, and a confined orphan must be snodo's to sweep.
    release = hold_adoption()
    try:
        env = confined_environment(env, named=(*policy.env, *pass_env), tmpdir=tmpdir)
        prepared = backend.prepare(argv, cwd=cwd, env=env, policy=policy, tmpdir=tmpdir)
        return _wrapped(prepared, pid_group(policy.limits.processes), release), tmpdir
    except BaseException:
        release()
        discard_private_dir(tmpdir)
        raise


def _wrapped(prepared: Prepared, group: PidGroup | None, release_adoption: Callable[[], None]) -> Prepared:
    """``prepared`` whose cleanup (always called last) also ends the run's hold on adoption,
    and with a pids cgroup of its own: limited, and killed as a whole."""
    reap, cleanup = prepared.reap, prepared.cleanup

    def reap_all(leader: int, others: Collection[int]) -> None:
        if group is not None:
            group.kill()
        if reap is not None:
            reap(leader, others)

    def cleanup_all() -> None:
        try:
            if group is not None:
                release(group)
            if cleanup is not None:
                cleanup()
        finally:
            release_adoption()

    spawning = group.spawning if group is not None else prepared.spawning
    return evolve(prepared, reap=reap_all, cleanup=cleanup_all, spawning=spawning)


def prepare_child(
    argv: Sequence[str],
    cwd: Path,
    env: Mapping[str, str] | None,
    sandbox: SandboxPolicy | None,
    pass_env: Sequence[str],
) -> tuple[Sequence[str], dict[str, str], Prepared | None, Path | None]:
    """What starting ``argv`` takes: the argv and environment to start (confined when
    ``sandbox`` says so), the sandbox's preparation and its private directory."""
    if not argv:
        raise EnvironmentProblem("cannot run a process: the command is empty")
    _check_cwd(argv[0], cwd)
    child_env = dict(env) if env is not None else dict(os.environ)
    child_env["PWD"] = os.path.abspath(cwd)
    if sandbox is None:
        return argv, child_env, None, None
    if sandbox.mode == "off":
        if sandbox.on_unconfined is not None:
            sandbox.on_unconfined(tuple(argv), Path(cwd))
        return argv, child_env, None, None
    # Inside the sandbox a missing program is only an exit status of bubblewrap: say so
    # here, as an unconfined start would, so it is no verdict (validator_error).
    if "/" not in argv[0] and shutil.which(argv[0], path=child_env.get("PATH", os.defpath)) is None:
        raise EnvironmentProblem(
            f"cannot run {shown(argv[0])!r}: program not found", hint="install it or fix the command"
        )
    prepared, tmpdir = _confine(argv, Path(cwd), child_env, sandbox, pass_env)
    return prepared.argv, prepared.env, prepared, tmpdir


def _check_cwd(program: str, cwd: Path) -> None:
    """Popen would blame the program for a missing working directory: say what is wrong."""
    try:
        is_dir = Path(cwd).is_dir()
    except (OSError, ValueError) as exc:
        raise EnvironmentProblem(
            f"cannot run {shown(program)!r}: the working directory {shown(cwd)} is unusable: "
            f"{getattr(exc, 'strerror', None) or exc}"
        ) from None
    if not is_dir:
        raise EnvironmentProblem(f"cannot run {shown(program)!r}: the working directory {shown(cwd)} does not exist")


def release_child(prepared: Prepared | None, tmpdir: Path | None) -> None:
    if prepared is not None and prepared.cleanup is not None:
        prepared.cleanup()
    if tmpdir is not None:
        discard_private_dir(tmpdir)
