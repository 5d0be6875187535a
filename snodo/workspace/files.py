"""File tools of the agent surface: read, list, write, delete, create directories.

Every mutation asks the :class:`~snodo.workspace.guard.PathGuard` first and touches
nothing when it refuses, so a refused call leaves the tree exactly as it was. Writes are
atomic (temp file + ``os.replace``): an interrupted write never leaves half a source file.
"""

from __future__ import annotations

import os
import stat
from pathlib import Path

from snodo.errors import StateError, ToolError
from snodo.state.atomic import atomic_write_bytes
from snodo.workspace.guard import PathGuard, name_key

MAX_READ_BYTES = 1024 * 1024


class Workspace:
    """The file tools over one project root, all paths root-relative POSIX strings."""

    def __init__(self, root: Path, guard: PathGuard) -> None:
        if Path(os.path.realpath(root)) != guard.root:
            raise ValueError(f"the guard watches {guard.root}, not {root}")
        self.root = guard.root
        self.guard = guard

    def read_file(self, path: str) -> str:
        """The UTF-8 text of a file; binary and oversized files are refused, not mangled."""
        target = self.guard.check_read(path)
        if target.is_dir():
            raise ToolError(f"cannot read {path!r}: it is a directory")
        if not target.is_file():
            raise ToolError(f"cannot read {path!r}: no such file")
        size = target.stat().st_size
        if size > MAX_READ_BYTES:
            raise ToolError(f"cannot read {path!r}: {size} bytes is over the {MAX_READ_BYTES}-byte limit")
        data = target.read_bytes()
        binary = ToolError(f"cannot read {path!r}: it is a binary file, not UTF-8 text")
        if b"\0" in data:
            raise binary
        try:
            return data.decode("utf-8")
        except UnicodeDecodeError:
            raise binary from None

    def list_files(self, path: str = ".") -> list[str]:
        """Every file under ``path`` (or ``path`` itself), sorted, root-relative.

        ``.git/`` is skipped: its internals are noise to an agent. Symlinked directories are
        listed but not entered, so a link cannot lead the listing out of the root or loop.
        """
        base = self.guard.check_read(path)
        if not base.exists():
            raise ToolError(f"cannot list {path!r}: no such file or directory")
        if not base.is_dir():
            return [self._relative(base)]
        found: list[str] = []
        for directory, dirnames, filenames in os.walk(base):
            dirnames[:] = [d for d in dirnames if name_key(d) != ".git"]
            here = Path(directory)
            found.extend(self._relative(here / name) for name in filenames)
            found.extend(self._relative(here / d) for d in dirnames if (here / d).is_symlink())
        return sorted(found)

    def write_file(self, path: str, content: str) -> dict[str, object]:
        """Create or replace a file with ``content`` (UTF-8), creating missing parents."""
        target = self.guard.check_mutation(path)
        if not isinstance(content, str):
            raise ToolError(f"cannot write {path!r}: content must be text")
        if path.endswith("/") or target.is_dir():
            raise ToolError(f"cannot write {path!r}: it names a directory")
        try:
            data = content.encode("utf-8")
        except UnicodeError as exc:
            raise ToolError(f"cannot write {path!r}: content is not encodable as UTF-8 ({exc})") from None
        existed = target.exists()
        mode = stat.S_IMODE(target.stat().st_mode) if existed else 0o644
        self._make_parents(target.parent)
        try:
            atomic_write_bytes(target, data, mode=mode)
        except StateError as exc:
            raise ToolError(f"cannot write {path!r}: {exc.message}") from None
        return {"path": self._relative(target), "bytes": len(data), "created": not existed}

    def delete_file(self, path: str) -> dict[str, object]:
        """Delete a file; a symlink is removed itself, never what it points to."""
        entry = self.guard.check_mutation(path, follow_symlinks=False)
        if not os.path.lexists(entry):
            raise ToolError(f"cannot delete {path!r}: no such file")
        if entry.is_dir() and not entry.is_symlink():
            raise ToolError(f"cannot delete {path!r}: it is a directory; delete_file removes files")
        try:
            entry.unlink()
        except OSError as exc:
            raise ToolError(f"cannot delete {path!r}: {exc.strerror or exc}") from None
        return {"path": self._relative(entry), "deleted": True}

    def create_directory(self, path: str) -> dict[str, object]:
        """Create a directory and its missing parents; an existing directory is fine."""
        target = self.guard.check_mutation(path)
        if target.is_dir():
            return {"path": self._relative(target), "created": False}
        if os.path.lexists(target):
            raise ToolError(f"cannot create directory {path!r}: a file of that name exists")
        self._make_parents(target)
        return {"path": self._relative(target), "created": True}

    def _make_parents(self, directory: Path) -> None:
        """Create ``directory`` and its missing ancestors, each asked of the guard before
        any is created, so a refusal leaves no stray directory behind."""
        missing: list[Path] = []
        while not directory.exists():
            missing.append(directory)
            directory = directory.parent
        for new in reversed(missing):
            self.guard.check_mutation(str(new))
        for new in reversed(missing):
            try:
                new.mkdir()
            except OSError as exc:
                where = self._relative(new)
                raise ToolError(f"cannot create directory {where!r}: {exc.strerror or exc}") from None

    def _relative(self, path: Path) -> str:
        return path.relative_to(self.root).as_posix()
