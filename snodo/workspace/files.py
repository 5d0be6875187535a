"""File tools of the agent surface. Every mutation asks the
:class:`~snodo.rules.guard.PathGuard` first (a refusal touches nothing), then acts through
directory descriptors opened with ``O_NOFOLLOW`` along the path the guard resolved (a directory
swapped for a symlink since makes it fail, never land elsewhere); writes are atomic.
"""

from __future__ import annotations

import contextlib
import errno
import os
import secrets
import stat
from collections.abc import Iterator
from pathlib import Path

from snodo.base.errors import ToolError
from snodo.rules.guard import PathGuard, name_key

MAX_READ_BYTES = 1024 * 1024


class Workspace:
    """The file tools over one project root, all paths root-relative POSIX strings."""

    def __init__(self, root: Path, guard: PathGuard, *, durable: bool = True) -> None:
        if Path(os.path.realpath(root)) != guard.root:
            raise ValueError(f"the guard watches {guard.root}, not {root}")
        self.root = guard.root
        self.guard = guard
        self.durable = durable  # False: writes are not flushed one by one (a disposable working copy)

    def read_file(self, path: str) -> str:
        """The UTF-8 text of a file; binary and oversized files are refused, not mangled."""
        target = self.guard.check_read(path)
        if target.is_dir():
            raise ToolError(f"cannot read {path!r}: it is a directory")
        if not target.is_file():
            raise ToolError(f"cannot read {path!r}: no such file")
        parts = self._parts(path, target)
        with _directory(self.root, path, parts[:-1], create=False) as parent:  # no symlink swapped in since
            try:
                flags = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0)
                fd = os.open(parts[-1], flags, dir_fd=parent)
            except OSError as exc:
                if exc.errno in (errno.ELOOP, errno.ENOTDIR, errno.EMLINK):
                    raise ToolError(f"cannot read {path!r}: {_RACE}") from None
                raise ToolError(f"cannot read {path!r}: {exc.strerror or exc}") from None
            with os.fdopen(fd, "rb") as handle:
                st = os.fstat(handle.fileno())
                if not stat.S_ISREG(st.st_mode):
                    raise ToolError(f"cannot read {path!r}: not a regular file")
                if st.st_size > MAX_READ_BYTES:
                    raise ToolError(f"cannot read {path!r}: {st.st_size} bytes is over the {MAX_READ_BYTES}-byte limit")
                data = handle.read(MAX_READ_BYTES + 1)
        binary = ToolError(f"cannot read {path!r}: it is a binary file, not UTF-8 text")
        if b"\0" in data:
            raise binary
        try:
            return data.decode("utf-8")
        except UnicodeDecodeError:
            raise binary from None

    def list_files(self, path: str = ".") -> list[str]:
        """Every file under ``path`` (or ``path`` itself), sorted, root-relative; ``.git/`` is
        skipped, symlinked directories are listed but not entered."""
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
        self._check_new_parents(target.parent)
        parts = self._parts(path, target)
        with _directory(self.root, path, parts[:-1], create=True) as parent:
            mode = _existing_file_mode(parent, parts[-1], path)
            _replace_at(parent, parts[-1], data, 0o644 if mode is None else mode, path, durable=self.durable)
        return {"path": self._relative(target), "bytes": len(data), "created": mode is None}

    def delete_file(self, path: str) -> dict[str, object]:
        """Delete a file; a symlink is removed itself, never what it points to."""
        entry = self.guard.check_mutation(path, follow_symlinks=False)
        if not os.path.lexists(entry):
            raise ToolError(f"cannot delete {path!r}: no such file")
        parts = self._parts(path, entry)
        with _directory(self.root, path, parts[:-1], create=False) as parent:
            try:
                st = os.stat(parts[-1], dir_fd=parent, follow_symlinks=False)
                if stat.S_ISDIR(st.st_mode):
                    raise ToolError(f"cannot delete {path!r}: it is a directory; delete_file removes files")
                os.unlink(parts[-1], dir_fd=parent)  # unlink never follows the last component
            except FileNotFoundError:
                raise ToolError(f"cannot delete {path!r}: no such file") from None
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
        self._check_new_parents(target)
        with _directory(self.root, path, self._parts(path, target), create=True):
            pass
        return {"path": self._relative(target), "created": True}

    def _check_new_parents(self, directory: Path) -> None:
        """Ask the guard about every directory a mutation would create before creating any."""
        missing: list[Path] = []
        while not directory.exists():
            missing.append(directory)
            directory = directory.parent
        for new in reversed(missing):
            self.guard.check_mutation(str(new))

    def _parts(self, path: str, resolved: Path) -> tuple[str, ...]:
        parts = resolved.relative_to(self.root).parts
        if not parts:  # the guard refuses the root; never act on it
            raise ToolError(f"cannot change {path!r}: it is the project root")
        return parts

    def _relative(self, path: Path) -> str:
        return path.relative_to(self.root).as_posix()


_RACE = "a directory on the path was replaced (by a symlink or a non-directory) meanwhile; nothing was done"
_DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | getattr(os, "O_CLOEXEC", 0)


@contextlib.contextmanager
def _directory(root: Path, path: str, components: tuple[str, ...], *, create: bool) -> Iterator[int]:
    """The descriptor of the directory ``components`` name below ``root`` (made if ``create``), each
    opened relative to the one before with ``O_NOFOLLOW``."""
    if not {os.open, os.rename, os.mkdir, os.unlink, os.stat} <= os.supports_dir_fd:
        raise ToolError(f"cannot change {path!r}: this platform cannot write without following symlinks")
    fds = [os.open(root, _DIR_FLAGS)]
    try:
        for name in components:
            fds.append(_open_dir(fds[-1], name, path, create=create))
        yield fds[-1]
    finally:
        for fd in fds:
            os.close(fd)


def _open_dir(fd: int, name: str, path: str, *, create: bool) -> int:
    try:
        return os.open(name, _DIR_FLAGS, dir_fd=fd)
    except FileNotFoundError:
        if not create:
            raise ToolError(f"cannot change {path!r}: no such file") from None
    except OSError as exc:
        if exc.errno in (errno.ELOOP, errno.ENOTDIR, errno.EMLINK):
            raise ToolError(f"cannot change {path!r}: {_RACE}") from None
        raise ToolError(f"cannot change {path!r}: {exc.strerror or exc}") from None
    try:
        os.mkdir(name, 0o777, dir_fd=fd)
        return os.open(name, _DIR_FLAGS, dir_fd=fd)
    except OSError as exc:
        if exc.errno in (errno.ELOOP, errno.ENOTDIR, errno.EEXIST, errno.EMLINK):
            raise ToolError(f"cannot change {path!r}: {_RACE}") from None
        raise ToolError(f"cannot create directory {name!r} for {path!r}: {exc.strerror or exc}") from None


def _existing_file_mode(dir_fd: int, name: str, path: str) -> int | None:
    """The permission bits of the regular file ``name`` in ``dir_fd``; ``None``: there is none."""
    try:
        st = os.stat(name, dir_fd=dir_fd, follow_symlinks=False)
    except FileNotFoundError:
        return None
    except OSError as exc:
        raise ToolError(f"cannot write {path!r}: {exc.strerror or exc}") from None
    if stat.S_ISDIR(st.st_mode):
        raise ToolError(f"cannot write {path!r}: it names a directory")
    if stat.S_ISLNK(st.st_mode):  # the guard resolved every link: one here now was put there since
        raise ToolError(f"cannot write {path!r}: {_RACE}")
    return stat.S_IMODE(st.st_mode)


def _replace_at(dir_fd: int, name: str, data: bytes, mode: int, path: str, *, durable: bool = True) -> None:
    """Write ``data`` to a fresh temporary file in ``dir_fd``, renamed over ``name`` itself (not what it points to)."""
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | getattr(os, "O_CLOEXEC", 0)
    tmp = f".{name[:200]}.{secrets.token_hex(8)}.tmp"  # O_EXCL: a name taken meanwhile fails, never follows
    try:
        fd = os.open(tmp, flags, 0o600, dir_fd=dir_fd)
        try:
            with os.fdopen(fd, "wb") as handle:
                handle.write(data)
                handle.flush()
                os.fchmod(handle.fileno(), mode)
                if durable:
                    os.fsync(handle.fileno())
            os.replace(tmp, name, src_dir_fd=dir_fd, dst_dir_fd=dir_fd)
        except BaseException:
            with contextlib.suppress(OSError):
                os.unlink(tmp, dir_fd=dir_fd)
            raise
        if durable:
            os.fsync(dir_fd)
    except OSError as exc:
        raise ToolError(f"cannot write {path!r}: {exc.strerror or exc}") from None
