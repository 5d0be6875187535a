"""Git tools of the agent surface, through the ``git`` program with literal pathspecs (so
``*.py`` cannot widen into ``.snodo/x.py``). Whatever would enter a commit passes the same
:class:`~snodo.rules.guard.PathGuard` as a file write: what is staged, the index at commit,
what a merged branch brings in. Methods marked *engine-only* are not tools.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path

from snodo.base.errors import PathValidationError, ToolError
from snodo.git.runner import GIT_TIMEOUT, GitTimeout, identity_env, run_git
from snodo.rules.guard import REASON_GITLINK, PathGuard
from snodo.workspace.gitmeta import gitlink_entries


class Git:
    """One repository whose work tree is (or contains) the guarded project root."""

    def __init__(self, root: Path, guard: PathGuard) -> None:
        if Path(os.path.realpath(root)) != guard.root:
            raise ValueError(f"the guard watches {guard.root}, not {root}")
        self.root = guard.root
        self.guard = guard

    def stage_files(self, paths: Sequence[str]) -> dict[str, object]:
        """Stage additions, changes and deletions under ``paths``; all or nothing: each must pass the guard first."""
        if isinstance(paths, str) or not paths:
            raise ToolError("stage_files needs a non-empty list of paths")
        entries = [self.guard.check_mutation(p, follow_symlinks=False) for p in paths]
        relative = [os.path.relpath(entry, self.root) for entry in entries]
        pending = self._run(
            "ls-files", "-z", "--full-name", "--modified", "--others", "--exclude-standard", "--", *relative
        )
        self._check_repo_paths(pending, staging=True)
        self._run("add", "-A", "--", *relative)
        return {"staged": sorted(Path(r).as_posix() for r in relative)}

    def commit(self, message: str) -> str:
        """Commit the index (re-checked: what was staged behind the tools' back is refused); the new sha."""
        if not isinstance(message, str) or not message.strip():
            raise ToolError("a commit needs a non-empty message")
        self._check_staged_gitlinks()  # first: diffs do not show gitlinks (submodules are ignored)
        staged = self._run("diff", "--cached", "--name-only", "--no-renames", "-z")
        if not staged:
            raise ToolError("nothing is staged; call stage_files first")
        self._check_repo_paths(staged)
        self._run("commit", "--quiet", "--file=-", stdin=message, identity=True)
        return self._head_sha()

    def read_diff(self, ref: str | None = None, staged: bool = False) -> str:
        args = ["diff", "--no-color", "--no-ext-diff"]
        if staged:
            args.append("--cached")
        if ref is not None:
            args.append(_argument(ref, "ref"))
        return self._run(*args, "--")

    def get_status(self) -> dict[str, object]:
        """The branch and the staged, unstaged, untracked and conflicted paths (relative to the top)."""
        out = self._run("status", "--porcelain=v2", "--branch", "-z", "--untracked-files=all")
        status: dict[str, list[str]] = {"staged": [], "unstaged": [], "untracked": [], "conflicted": []}
        branch: str | None = None
        records = iter(out.split("\0"))
        for record in records:
            kind, _, rest = record.partition(" ")
            if rest.startswith("branch.head "):
                head = rest.removeprefix("branch.head ")
                branch = None if head == "(detached)" else head
            elif kind == "?":
                status["untracked"].append(rest)
            elif kind in ("1", "2"):
                fields = rest.split(" ", 7 if kind == "1" else 8)
                if kind == "2":
                    next(records)  # the original path of a rename
                for flag, where in zip(fields[0], ("staged", "unstaged"), strict=True):  # XY: the index, the work tree
                    if flag != ".":
                        status[where].append(fields[-1])
            elif kind == "u":
                status["conflicted"].append(rest.split(" ", 9)[-1])
        return {"branch": branch, **status}

    def create_branch(self, name: str, start: str | None = None) -> dict[str, object]:
        """Create branch ``name`` at ``start`` (default HEAD) without switching to it."""
        self._check_branch(name)
        args = ["branch", "--", name]
        if start is not None:
            args.append(_argument(start, "start"))
        self._run(*args)
        return {"branch": name, "head": self._run("rev-parse", "--verify", f"refs/heads/{name}").strip()}

    def merge_branch(self, name: str, message: str | None = None) -> dict[str, object]:
        """Merge branch ``name`` (a merge commit), refused if it changes a protected path; aborted if it fails."""
        self._check_branch(name)
        if self._run("rev-parse", "--quiet", "--verify", "MERGE_HEAD", check=False):
            raise ToolError("a merge is already in progress; conclude or abort it first")
        incoming = self._run("diff", "--name-only", "--no-renames", "-z", f"HEAD...refs/heads/{name}", "--")
        self._check_repo_paths(incoming)
        args = ["merge", "--no-ff", "--no-edit"]
        if message is not None:
            if not message.strip():
                raise ToolError("a merge message, when given, must not be empty")
            args.append(f"--message={message}")
        try:
            self._run(*args, f"refs/heads/{name}", identity=True)
        except ToolError:
            self._run("merge", "--abort", check=False)
            raise
        return {"merged": name, "head": self._head_sha()}

    def delete_branch(self, name: str) -> dict[str, object]:
        """Delete a fully merged branch; unmerged work is never thrown away here."""
        self._check_branch(name)
        self._run("branch", "--delete", "--", name)
        return {"deleted": name}

    def is_repo(self) -> bool:
        """Engine-only: whether the root is inside a git work tree."""
        return self._run("rev-parse", "--is-inside-work-tree", check=False).strip() == "true"

    def head(self) -> str | None:
        """Engine-only: the sha HEAD points at, ``None`` before the first commit."""
        return self._run("rev-parse", "--verify", "--quiet", "HEAD", check=False).strip() or None

    def changed_files(self, since: str) -> list[str]:
        """Engine-only: root-relative files changed since ``since``, untracked ones included."""
        changed = self._run("diff", "--name-only", "--no-renames", "--relative", "-z", _argument(since, "since"), "--")
        untracked = self._run("ls-files", "-z", "--others", "--exclude-standard")
        return sorted({p for p in (changed + untracked).split("\0") if p})

    def _check_repo_paths(self, listing: str, *, staging: bool = False) -> None:
        """Guard each path of a ``-z`` listing git made relative to the repository's top; ``staging``:
        refuse a nested repository too (listed as ``dir/`` if untracked, a directory holding a ``.git``)."""
        top = self._run("rev-parse", "--show-toplevel").strip()
        paths = [path for path in listing.split("\0") if path]
        for path in paths:
            self.guard.check_mutation(os.path.join(top, path), follow_symlinks=False)
        for path in paths if staging else ():
            full = Path(top, path)
            if path.endswith("/") or (full.is_dir() and not full.is_symlink() and os.path.lexists(full / ".git")):
                raise PathValidationError(path.rstrip("/"), REASON_GITLINK)

    def _check_staged_gitlinks(self) -> None:
        """Refuse a commit whose index adds or moves a gitlink, comparing index and HEAD (diffs hide submodules)."""
        head = self._run("ls-tree", "-r", "-z", "--full-tree", "HEAD", check=False) if self.head() else ""
        new = gitlink_entries(self._run("ls-files", "-s", "-z", "--full-name")) - gitlink_entries(head, 2)
        if new:
            raise PathValidationError(sorted(new)[0][0], REASON_GITLINK)

    def _check_branch(self, name: str) -> None:
        _argument(name, "branch name")
        # `--branch` expands `@{-1}` and the like; only a name that stays itself is accepted.
        if self._run("check-ref-format", "--branch", name, check=False).strip() != name:
            raise ToolError(f"{name!r} is not a valid branch name")

    def _head_sha(self) -> str:
        return self._run("rev-parse", "--verify", "HEAD").strip()

    def _run(self, *args: str, check: bool = True, stdin: str | None = None, identity: bool = False) -> str:
        """git's stdout; a failure (with ``check``) or a time-out is a :class:`ToolError`.
        ``identity``: a committer for commands that create commits."""
        env = {"GIT_LITERAL_PATHSPECS": "1", **(identity_env(self.root) if identity else {})}
        try:
            result = run_git(self.root, *args, stdin=stdin, env=env)
        except GitTimeout:
            raise ToolError(f"git {args[0]} did not finish within {GIT_TIMEOUT:.0f} s") from None
        if not result.ok:
            if check:
                raise ToolError(f"git {args[0]} failed: {result.detail()}")
            return ""
        return result.stdout


def _argument(value: str, what: str) -> str:
    """Refuse a value git would read as an option (argument injection)."""
    if not isinstance(value, str) or not value.strip():
        raise ToolError(f"{what} must be a non-empty string")
    if value.startswith("-"):
        raise ToolError(f"{what} {value!r} must not start with '-'")
    return value
