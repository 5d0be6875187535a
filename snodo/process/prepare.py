"""How a child process of :mod:`snodo.process.runner` is prepared: its working directory
checked, its environment made and, with a sandbox policy, its confinement."""

from __future__ import annotations

import os
import shutil
from collections.abc import Collection, Mapping, Sequence
from contextlib import ExitStack
from pathlib import Path

from attrs import evolve

from snodo.base.errors import EnvironmentProblem
from snodo.sandbox import Prepared, SandboxPolicy, choose_backend
from snodo.sandbox.base import hold_adoption
from snodo.sandbox.cgroup import pid_group, release
from snodo.sandbox.environ import confined_environment, discard_private_dir, make_private_dir
from snodo.sandbox.policy import resolved


def shown(path: object, limit: int = 120) -> str:
    text = str(path)
    return text if len(text) <= limit else f"{text[:limit]}… ({len(text)} characters)"


def prepare_child(
    argv: Sequence[str],
    cwd: Path,
    env: Mapping[str, str] | None,
    sandbox: SandboxPolicy | None,
    pass_env: Sequence[str],
    cleanups: ExitStack,
) -> tuple[Sequence[str], dict[str, str], Prepared | None]:
    """The argv and environment to start ``argv`` with (confined when ``sandbox`` says so) and
    the sandbox's preparation; what is to be undone once the run is over goes on ``cleanups``
    as soon as it exists."""
    if not argv:
        raise EnvironmentProblem("cannot run a process: the command is empty")
    _check_cwd(argv[0], cwd)
    child_env = dict(env) if env is not None else dict(os.environ)
    child_env["PWD"] = os.path.abspath(cwd)
    if sandbox is None or sandbox.mode == "off":
        if sandbox is not None and sandbox.on_unconfined is not None:
            sandbox.on_unconfined(tuple(argv), Path(cwd))
        return argv, child_env, None
    # Inside the sandbox a missing program is only an exit status of bubblewrap: say so
    # here, as an unconfined start would, so it is no verdict (validator_error).
    if "/" not in argv[0] and shutil.which(argv[0], path=child_env.get("PATH", os.defpath)) is None:
        raise EnvironmentProblem(
            f"cannot run {shown(argv[0])!r}: program not found", hint="install it or fix the command"
        )
    prepared = _confine(argv, Path(cwd), child_env, sandbox, pass_env, cleanups)
    return prepared.argv, prepared.env, prepared


def _confine(
    argv: Sequence[str],
    cwd: Path,
    env: dict[str, str],
    policy: SandboxPolicy,
    pass_env: Sequence[str],
    cleanups: ExitStack,
) -> Prepared:
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
    cleanups.callback(discard_private_dir, tmpdir)
    # Until the run is over snodo is the child subreaper: bubblewrap's init outlives its
    # monitor by a moment, and a confined orphan must be snodo's to sweep.
    cleanups.callback(hold_adoption())
    env = confined_environment(env, named=(*policy.env, *pass_env), tmpdir=tmpdir)
    prepared = backend.prepare(argv, cwd=cwd, env=env, policy=policy, tmpdir=tmpdir, cleanups=cleanups)
    group = pid_group(policy.limits.processes)  # limited, and killed as a whole
    if group is None:
        return prepared
    cleanups.callback(release, group)
    reap = prepared.reap

    def reap_all(leader: int, others: Collection[int]) -> None:
        group.kill()
        if reap is not None:
            reap(leader, others)

    return evolve(prepared, reap=reap_all, spawning=group.spawning)


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
