"""No new git metadata from agents: a ``.git`` or a gitlink that appears below a root is refused.

A ``.git`` directory or file planted below the workspace (``vendor/.git`` with
``core.fsmonitor`` set, ``app/.git`` in a project that lives in a repository's
subdirectory) is a configuration git would read the next time anyone, the user included,
runs git there; a gitlink in the index makes git look inside it. The tool surface refuses
such paths by name (:class:`~snodo.workspace.guard.PathGuard`), but confined code — a test
suite, a validator, an in-place coder — writes where it likes inside its workspace. So the
engine and the MCP host take a :class:`GitMetaWatch` before such code runs and call
:meth:`GitMetaWatch.intruders` after: what is new is removed and reported, and the caller
refuses the call or halts the run as ``blocker`` with a ``path_refused`` event per path.

Cost: one ``os.scandir`` walk of the workspace (directory names only are compared; the
contents of ``.git`` directories and of Python environments are never entered) and one
``git ls-files --stage`` per check, paid only after confined code ran, never per
file-tool call.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

from snodo.errors import PathValidationError
from snodo.gitrun import run_git

REASON_NEW_GIT = (
    "a new `.git` below the workspace (a nested repository git would read the configuration of) "
    "was created by confined code; it was removed"
)
REASON_NEW_GITLINK = "a new gitlink (a nested repository in the index) appeared; it was unstaged"
GITLINK_MODE = "160000"
# A Python environment is not entered: it holds thousands of directories, the sandbox keeps
# it read-only and the path guard refuses writes into it (issue #21, item 8).
_ENV_MARKERS = frozenset({"pyvenv.cfg", "conda-meta"})


def _is_git_name(name: str) -> bool:
    # `.GIT` is `.git` on a case-insensitive file system, `.git.` on Windows.
    return name[:1] == "." and name.casefold().rstrip(". ") == ".git"


def git_entries(root: Path) -> set[str]:
    """Root-relative POSIX paths of every ``.git`` file, directory or link below ``root``
    (``root/.git`` included); symlinked directories, ``.git`` directories and Python
    environments are not entered."""
    found: set[str] = set()
    stack = [root]
    while stack:
        here = stack.pop()
        try:
            with os.scandir(here) as listing:
                entries = list(listing)
        except OSError:
            continue
        names = {entry.name for entry in entries}
        environment = bool(names & _ENV_MARKERS)
        for entry in entries:
            if _is_git_name(entry.name):
                found.add(Path(entry.path).relative_to(root).as_posix())
            elif not environment and entry.is_dir(follow_symlinks=False):
                stack.append(Path(entry.path))
    return found


def gitlinks(root: Path) -> set[str]:
    """Paths (as git names them, relative to ``root``) the index holds as gitlinks."""
    result = run_git(root, "ls-files", "--stage", "-z", env={"GIT_OPTIONAL_LOCKS": "0"})
    if not result.ok:
        return set()
    found = set()
    for record in filter(None, result.stdout.split("\0")):
        meta, _, path = record.partition("\t")
        if meta.split(" ", 1)[0] == GITLINK_MODE:
            found.add(path)
    return found


class GitMetadataRefused(PathValidationError):
    """Confined code left new git metadata behind (already removed): ``found`` holds each
    ``(path, reason)``; the call or run it came from is refused."""

    def __init__(self, found: list[tuple[str, str]]) -> None:
        super().__init__(found[0][0], found[0][1])
        self.found = tuple(found)
        shown = ", ".join(path for path, _ in self.found[:5])
        self.message = f"refused: confined code created git metadata ({shown}); {REASON_NEW_GIT}"
        self.args = (self.message,)


class GitMetaWatch:
    """What git metadata a workspace holds now; :meth:`intruders` finds (and undoes) what
    appears later."""

    def __init__(self, root: Path) -> None:
        self.root = Path(os.path.realpath(root))
        self.entries = git_entries(self.root)
        self.links = gitlinks(self.root)
        self._found: list[tuple[str, str]] | None = None

    def intruders(self) -> list[tuple[str, str]]:
        """``(path, reason)`` for each ``.git`` entry or gitlink that is new since the
        snapshot; each is removed (the entry) or unstaged (the gitlink) before returning."""
        found: list[tuple[str, str]] = []
        for rel in sorted(git_entries(self.root) - self.entries):
            _remove(self.root / rel)
            found.append((rel, REASON_NEW_GIT))
        new_links = gitlinks(self.root) - self.links
        for rel in sorted(new_links):
            run_git(self.root, "rm", "--cached", "-q", "--", rel, env={"GIT_LITERAL_PATHSPECS": "1"})
            found.append((rel, REASON_NEW_GITLINK))
        return found

    def found(self) -> list[tuple[str, str]]:
        """What :meth:`intruders` found, run once and remembered."""
        if self._found is None:
            self._found = self.intruders()
        return self._found

    def check(self) -> None:
        """Raise :class:`GitMetadataRefused` if :meth:`found` holds anything."""
        if self.found():
            raise GitMetadataRefused(self.found())


def _remove(path: Path) -> None:
    try:
        if path.is_dir() and not path.is_symlink():
            shutil.rmtree(path, ignore_errors=True)
        else:
            path.unlink(missing_ok=True)
    except OSError:
        pass
