"""Per-run working copies: a git worktree per run, keyed by project AND run id.

A run never switches the user's checkout, never touches their uncommitted files and never
collides with a leftover of an earlier run of the same task: each run gets its own
``$SNODO_HOME/worktrees/<project-key>/<run_id>`` on its own branch
``snodo/<task_id>-<run_id>``. A repository with no commit yet gets a base commit made
with plumbing (no branch of the user's moves).
"""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
from pathlib import Path

from attrs import frozen

from snodo.errors import EnvironmentProblem

_ENV = {
    "GIT_TERMINAL_PROMPT": "0",
    "GIT_AUTHOR_NAME": "snodo",
    "GIT_AUTHOR_EMAIL": "snodo@localhost",
    "GIT_COMMITTER_NAME": "snodo",
    "GIT_COMMITTER_EMAIL": "snodo@localhost",
}


def _git(cwd: Path, *args: str, identity: bool = False) -> str:
    env = {**os.environ, **(_ENV if identity else {"GIT_TERMINAL_PROMPT": "0"})}
    proc = subprocess.run(["git", "-C", str(cwd), *args], capture_output=True, text=True, env=env)
    if proc.returncode != 0:
        raise EnvironmentProblem(f"git {' '.join(args[:3])} failed in {cwd}: {proc.stderr.strip()}")
    return proc.stdout.strip()


def project_key(root: Path) -> str:
    return hashlib.sha256(str(root.resolve()).encode()).hexdigest()[:16]


@frozen(kw_only=True)
class Worktree:
    path: Path
    branch: str
    base: str
    repo: Path

    def remove(self) -> None:
        """Drop the working copy. A branch with commits stays for inspection; a branch the
        run never committed to is deleted, so halted runs leave no empty branches behind."""
        subprocess.run(
            ["git", "-C", str(self.repo), "worktree", "remove", "--force", str(self.path)],
            capture_output=True,
            text=True,
        )
        if self.path.exists():
            shutil.rmtree(self.path, ignore_errors=True)
        subprocess.run(["git", "-C", str(self.repo), "worktree", "prune"], capture_output=True, text=True)
        tip = subprocess.run(
            ["git", "-C", str(self.repo), "rev-parse", "--verify", "-q", self.branch], capture_output=True, text=True
        ).stdout.strip()
        if tip == self.base:
            subprocess.run(["git", "-C", str(self.repo), "branch", "-D", self.branch], capture_output=True, text=True)


def require_repo(root: Path) -> None:
    if shutil.which("git") is None:
        raise EnvironmentProblem("git is not installed", hint="install git; snodo commits on task branches")
    proc = subprocess.run(["git", "-C", str(root), "rev-parse", "--show-toplevel"], capture_output=True, text=True)
    if proc.returncode != 0:
        raise EnvironmentProblem(f"{root} is not a git repository", hint="run `git init` in the project first")


def uncommitted(repo: Path) -> list[str]:
    """Paths with uncommitted changes in the user's checkout (governance state aside): a run
    starts from the last commit, so these are not part of it and the user should know."""
    proc = subprocess.run(
        ["git", "-C", str(repo), "--no-optional-locks", "status", "--porcelain", "--", ".", ":!.snodo"],
        capture_output=True,
        text=True,
    )
    return [line[3:] for line in proc.stdout.splitlines() if line.strip()]


def create_worktree(repo: Path, home: Path, task_id: str, run_id: str) -> Worktree:
    require_repo(repo)
    head = subprocess.run(
        ["git", "-C", str(repo), "rev-parse", "--verify", "-q", "HEAD"], capture_output=True, text=True
    ).stdout.strip()
    if not head:
        empty_tree = _git(repo, "hash-object", "-t", "tree", "/dev/null")
        head = _git(
            repo, "commit-tree", empty_tree, "-m", "snodo: empty base for a repository with no commits", identity=True
        )
    branch = f"snodo/{task_id}-{run_id}"
    path = home / "worktrees" / project_key(repo) / run_id
    path.parent.mkdir(parents=True, exist_ok=True)
    _git(repo, "worktree", "add", "-q", "-b", branch, str(path), head)
    return Worktree(path=path, branch=branch, base=head, repo=repo)
