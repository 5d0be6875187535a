"""The one way snodo runs ``git``: no shell, no prompt, a time limit, git's own words on failure.

Every module of the core that needs git (the agent's git tools in
:mod:`snodo.workspace.git`, the engine's working copies in :mod:`snodo.engine.worktree`,
the demo) calls :func:`run_git`; a test keeps it the only place that starts the program.
"""

from __future__ import annotations

import os
import subprocess
from collections.abc import Mapping
from pathlib import Path

from attrs import frozen

from snodo.errors import EnvironmentProblem

#: Seconds any one git command may take before it is killed and reported.
GIT_TIMEOUT = 120.0

#: Who commits when the repository names nobody (engine commits, the empty base commit).
FALLBACK_IDENTITY = {"user.name": "snodo", "user.email": "snodo@localhost"}


@frozen(kw_only=True)
class GitResult:
    args: tuple[str, ...]
    returncode: int
    stdout: str
    stderr: str

    @property
    def ok(self) -> bool:
        return self.returncode == 0

    def detail(self) -> str:
        """git's own explanation of a failure (stderr, else stdout, else the exit code)."""
        text = "\n".join(filter(None, (self.stderr.strip(), self.stdout.strip())))
        return text or f"exit code {self.returncode}"


class GitTimeout(EnvironmentProblem):
    """A git command overran :data:`GIT_TIMEOUT` and was killed."""


def run_git(
    repo: Path,
    *args: str,
    stdin: str | None = None,
    env: Mapping[str, str] | None = None,
    timeout: float = GIT_TIMEOUT,
) -> GitResult:
    """Run ``git -C repo args``; never raises for git's own failure (see ``returncode``),
    only when git cannot start (:class:`EnvironmentProblem`) or overruns ``timeout``
    (:class:`GitTimeout`)."""
    full_env = {**os.environ, "GIT_TERMINAL_PROMPT": "0", "GIT_EDITOR": ":", **(env or {})}
    argv = ["git", "-C", str(repo), *args]
    try:
        proc = subprocess.run(
            argv,
            input=stdin,
            capture_output=True,
            text=True,
            encoding="utf-8",
            errors="replace",
            env=full_env,
            timeout=timeout,
            check=False,
            stdin=None if stdin is not None else subprocess.DEVNULL,
        )
    except FileNotFoundError:
        raise EnvironmentProblem("cannot run 'git': program not found", hint="install git") from None
    except subprocess.TimeoutExpired:
        raise GitTimeout(
            f"git {' '.join(args[:2])} did not finish within {timeout:g} s in {repo}",
            hint="check for a lock file or a hook that waits (.git/hooks), then run again",
        ) from None
    return GitResult(args=tuple(args), returncode=proc.returncode, stdout=proc.stdout, stderr=proc.stderr)


def git_out(repo: Path, *args: str, stdin: str | None = None, env: Mapping[str, str] | None = None) -> str:
    """stdout of a git command that must succeed; a failure is an :class:`EnvironmentProblem`
    naming the command, the repository and git's explanation."""
    result = run_git(repo, *args, stdin=stdin, env=env)
    if not result.ok:
        raise EnvironmentProblem(f"git {' '.join(args[:3])} failed in {repo}: {result.detail()}")
    return result.stdout.strip()


def identity_args(repo: Path) -> list[str]:
    """``-c`` options naming snodo as author only for what the repository leaves unset."""
    args: list[str] = []
    for key, value in FALLBACK_IDENTITY.items():
        if not run_git(repo, "config", "--get", key).stdout.strip():
            args += ["-c", f"{key}={value}"]
    return args
