"""Durable state files: a write is renamed into place (a reader sees the old or the new file,
never half of one); a file that does not parse is reported and left alone (replacing it would
destroy the evidence of what went wrong); locks hold across processes."""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, TypeVar

from cattrs.errors import ClassValidationError, IterableValidationError
from cattrs.v import transform_error

from snodo.base.convert import CONVERTER
from snodo.base.errors import StateError

T = TypeVar("T")


def fsync_dir(directory: Path) -> None:
    fd = os.open(directory, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _write_temp(path: Path, data: bytes, mode: int, place: Callable[[str], None]) -> None:
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
            handle.flush()
            os.fsync(handle.fileno())
        os.chmod(tmp, mode)
        place(tmp)
    finally:
        with contextlib.suppress(OSError):  # renamed away, or linked into place
            os.unlink(tmp)
    fsync_dir(path.parent)


def atomic_write_bytes(path: Path, data: bytes, *, mode: int = 0o644) -> None:
    path = Path(path)
    try:
        _write_temp(path, data, mode, lambda tmp: os.replace(tmp, path))
    except OSError as exc:
        raise StateError(f"cannot write {path}: {exc.strerror or exc}") from exc


def atomic_write_text(path: Path, text: str, *, mode: int = 0o644) -> None:
    atomic_write_bytes(path, text.encode("utf-8"), mode=mode)


def atomic_create_bytes(path: Path, data: bytes, *, mode: int = 0o600) -> bool:
    """Create ``path`` holding ``data`` unless it exists (True if this call made it), linked
    into place complete: concurrent creators agree on one winner, no reader sees it empty."""
    path = Path(path)
    try:
        _write_temp(path, data, mode, lambda tmp: os.link(tmp, path))
    except FileExistsError:
        return False
    except OSError as exc:
        raise StateError(f"cannot create {path}: {exc.strerror or exc}") from exc
    return True


def dumps_json(obj: Any) -> str:
    """Stable, human-readable JSON for state files; NaN and non-JSON values are refused."""
    return json.dumps(obj, indent=2, sort_keys=True, ensure_ascii=False, allow_nan=False) + "\n"


def canonical_json(obj: Any) -> bytes:
    """The exact bytes that get hashed or signed: sorted keys, no spaces, UTF-8, no NaN."""
    return json.dumps(obj, sort_keys=True, separators=(",", ":"), ensure_ascii=False, allow_nan=False).encode("utf-8")


def atomic_write_json(path: Path, obj: Any, *, mode: int = 0o644) -> None:
    try:
        text = dumps_json(obj)
    except (TypeError, ValueError) as exc:
        raise StateError(f"cannot write {path}: value is not JSON-serialisable ({exc})") from exc
    atomic_write_text(path, text, mode=mode)


def read_bytes(path: Path) -> bytes:
    """``FileNotFoundError`` passes through for the caller to explain."""
    try:
        return Path(path).read_bytes()
    except FileNotFoundError:
        raise
    except OSError as exc:
        raise StateError(f"cannot read {path}: {exc.strerror or exc}") from exc


def read_json(path: Path) -> Any:
    """The parsed file; ``FileNotFoundError`` (no state yet) passes through."""
    raw = read_bytes(path)
    try:
        return json.loads(raw.decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise StateError(
            f"{path} is corrupt: {exc}",
            hint="inspect or restore the file by hand; snodo never overwrites a corrupt file",
        ) from exc


@contextlib.contextmanager
def file_lock(path: Path, *, shared: bool = False) -> Iterator[None]:
    """An exclusive (or shared) ``flock`` on ``<path>.lock``, across processes and threads (a
    descriptor per call), never deleted: unlinking it would let two processes lock two inodes."""
    lock_path = Path(path).with_name(Path(path).name + ".lock")
    try:
        fd = os.open(lock_path, os.O_RDWR | os.O_CREAT, 0o600)
    except OSError as exc:
        raise StateError(f"cannot open lock file {lock_path}: {exc.strerror or exc}") from exc
    try:
        fcntl.flock(fd, fcntl.LOCK_SH if shared else fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)  # releases the lock


def unstructure(record: Any) -> Any:
    return CONVERTER.unstructure(record)


def load_record(path: Path, cls: type[T]) -> T:
    data = read_json(path)
    try:
        return CONVERTER.structure(data, cls)
    except (ClassValidationError, IterableValidationError) as exc:
        problems = "; ".join(transform_error(exc, path="$"))
        raise StateError(f"{path} is corrupt: {problems}") from exc
    except (TypeError, ValueError, KeyError, AttributeError) as exc:
        raise StateError(f"{path} is corrupt: {exc}") from exc


def save_record(path: Path, record: Any) -> None:
    atomic_write_json(path, unstructure(record))
