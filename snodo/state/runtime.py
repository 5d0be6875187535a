"""Where a project's runtime state lives: under the repository's common git directory.

The audit log, the project state (``state.json``), jobs, plans, proposals and their lock
files are runtime state: never committed, and out of reach of routine cleanup. ``git clean
-fdx`` removes every ignored file of the working tree, so they are kept where git keeps its
own (``<common git dir>/snodo/``, ``git rev-parse --git-common-dir``): linked worktrees,
snodo's own pooled copies among them, share the main checkout's state, and a fresh clone
starts fresh. ``.snodo/`` in the working tree keeps only what is committed (the protocol,
``allowed_signers``, decisions). The git directory is read-only to confined processes
(:data:`snodo.sandbox.layout.ALWAYS_READ_ONLY`, and outside a linked worktree's workspace).

A project whose ``.snodo/`` still holds the runtime state an older snodo kept there has it
moved here once, file by file, never over a file that differs (:func:`migrate`).
"""

from __future__ import annotations

import contextlib
import errno
import hashlib
import os
import shutil
import sys
import threading
from collections.abc import Callable
from pathlib import Path

from snodo.base.errors import EnvironmentProblem, StateError
from snodo.git.runner import pin, run_git

#: The folder under the common git directory (a project below the work tree's top gets
#: ``<common>/snodo/projects/<path from the top>``).
DIRNAME = "snodo"
#: What an older snodo kept in ``.snodo/`` (``.gitignore`` patterns): moved by :func:`migrate`,
#: and never committed by ``snodo protocol sign`` while a leftover is there.
LEGACY_RUNTIME = ("state.json", "jobs/", "*.lock", "plans/", "proposals/", "audit.log", "audit.log.*")
_LEGACY_DIRS = ("jobs", "plans", "proposals")

_FOUND: dict[Path, Path] = {}
_LOCK = threading.Lock()


def _say(text: str) -> None:
    print(f"note: {text}", file=sys.stderr, flush=True)


#: How a migration is announced (stderr; stdout may be JSON or an MCP stream).
announce: Callable[[str], None] = _say


def runtime_dir(project: Path) -> Path:
    """The directory holding ``project``'s runtime state, created if absent, with an older
    snodo's state moved in from ``.snodo/`` the first time. Raises
    :class:`~snodo.base.errors.EnvironmentProblem` when the project is in no git repository: there
    is nowhere out of reach of routine cleanup to keep its audit log."""
    real = Path(os.path.realpath(project))
    with _LOCK:
        known = _FOUND.get(real)
    if known is not None and known.is_dir():
        return known
    context = pin(real)
    if context is None:
        raise EnvironmentProblem(
            f"{real} is not a git repository: snodo keeps a project's runtime state (audit log, jobs, "
            "current mode) in its git directory, where `git clean` does not reach",
            hint="run `git init` in the project first",
        )
    common = context.common_dir()
    rel = real.relative_to(context.work_tree) if real != context.work_tree else None
    where = common / DIRNAME if rel is None else common / DIRNAME / "projects" / rel
    top = context.work_tree
    if top in common.parents and common != top / ".git" and top / ".git" not in common.parents:
        # a git directory elsewhere in the working tree is not read-only to confined code
        raise EnvironmentProblem(
            f"the git directory of {top} is {common}, inside its working tree: snodo cannot keep its "
            "runtime state there out of confined processes' reach",
            hint="move the git directory to `.git` or outside the working tree",
        )
    try:
        where.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise StateError(f"cannot create {where}: {exc.strerror or exc}") from exc
    moved = migrate(real / ".snodo", where, tracked=_tracked(top, real / ".snodo"))
    if moved:
        announce(
            f"moved snodo's runtime state ({', '.join(moved)}) from {real / '.snodo'} to {where}, out of reach of "
            "`git clean`; `.snodo/` now holds only what is committed"
        )
    with _LOCK:
        _FOUND[real] = where
    return where


def audit_log_path(project: Path) -> Path:
    """The project's audit log (:mod:`snodo.state.audit`)."""
    return runtime_dir(project) / "audit.log"


# ------------------------------------------------------------------ migration


def _legacy_names(old: Path) -> list[str]:
    try:
        names = sorted(os.listdir(old))
    except (FileNotFoundError, NotADirectoryError):
        return []
    except OSError as exc:
        raise StateError(f"cannot read {old}: {exc.strerror or exc}") from exc
    return [
        n
        for n in names
        if n in ("state.json", "audit.log", *_LEGACY_DIRS) or n.startswith("audit.log.") or n.endswith(".lock")
    ]


def _tracked(top: Path, old: Path) -> frozenset[Path]:
    """The files git tracks under ``old`` (only asked when an older snodo's names are there):
    a committed file is the project's, never moved."""
    if not _legacy_names(old):
        return frozenset()
    listing = run_git(top, "ls-files", "-z", "--", str(old))
    if not listing.ok:
        raise StateError(f"cannot list the files git tracks in {old}: {listing.detail()}")
    return frozenset(top / rel for rel in listing.stdout.split("\0") if rel)


def migrate(old: Path, new: Path, *, tracked: frozenset[Path] = frozenset()) -> list[str]:
    """Move what an older snodo kept in ``old`` (``<project>/.snodo``) into ``new``; the names
    moved. A file in ``tracked`` (committed) stays where it is. Each file is linked into
    place and then unlinked (never over an existing file), so a crash leaves it in one
    place or both, never lost; a file already there with the
    same bytes is the same file. Both there and different: :class:`StateError`, nothing of
    that file touched. Lock files are left behind (a lock file is never deleted while a
    process may hold it) and the audit log's checkpoint in the home is copied to the new
    path's before the log moves."""
    names = _legacy_names(old)
    if not names:
        return []
    moved: list[str] = []
    for name in names:
        if name.endswith(".lock"):
            continue
        if name == "audit.log":
            if old / name in tracked:
                continue
            if os.path.lexists(new / name) and not _same_bytes(old / name, new / name):
                raise _conflict(old / name, new / name)
            _move_anchor(old / name, new / name)
            if _move(old / name, new / name, tracked):
                moved.append(name)
            continue
        if _move(old / name, new / name, tracked):
            moved.append(name + ("/" if name in _LEGACY_DIRS else ""))
    return moved


def _same_bytes(a: Path, b: Path) -> bool:
    try:
        if a.stat().st_size != b.stat().st_size:
            return False
        with a.open("rb") as fa, b.open("rb") as fb:
            while True:
                x, y = fa.read(1 << 16), fb.read(1 << 16)
                if x != y:
                    return False
                if not x:
                    return True
    except OSError:
        return False


def _conflict(src: Path, dst: Path) -> StateError:
    return StateError(
        f"snodo's runtime state is in two places: {src} (kept there by an older snodo) and {dst} differ",
        hint=f"keep one: move {src} aside (or remove it) once you know which is current; nothing was changed",
    )


def _move(src: Path, dst: Path, tracked: frozenset[Path] = frozenset()) -> bool:
    """Move ``src`` (a file or a directory tree) to ``dst`` without replacing anything that
    differs, leaving ``tracked`` files where they are; whether anything moved."""
    if src.is_symlink() or not src.is_dir():
        return False if src in tracked else _move_file(src, dst)
    try:
        dst.mkdir(exist_ok=True)
    except FileExistsError:
        raise _conflict(src, dst) from None
    except OSError as exc:
        raise StateError(f"cannot create {dst}: {exc.strerror or exc}") from exc
    moved = [_move(src / entry, dst / entry, tracked) for entry in _listdir(src)]
    with contextlib.suppress(OSError):  # a tracked file, or something new: left for now
        src.rmdir()
    return any(moved)


def _listdir(path: Path) -> list[str]:
    try:
        return sorted(os.listdir(path))
    except OSError as exc:
        raise StateError(f"cannot read {path}: {exc.strerror or exc}") from exc


def _move_file(src: Path, dst: Path) -> bool:
    try:
        os.link(src, dst, follow_symlinks=False)
    except FileNotFoundError:
        return False  # another process moved it first
    except FileExistsError:
        if src.is_symlink() or dst.is_symlink() or not _same_bytes(src, dst):
            raise _conflict(src, dst) from None
    except OSError as exc:
        if exc.errno not in (errno.EXDEV, errno.EPERM, errno.EMLINK, errno.ENOTSUP):
            raise StateError(f"cannot move {src} to {dst}: {exc.strerror or exc}") from exc
        _copy_into_place(src, dst)
    try:
        src.unlink()
    except FileNotFoundError:
        pass
    except OSError as exc:
        raise StateError(f"cannot remove {src} after moving it to {dst}: {exc.strerror or exc}") from exc
    return True


def _copy_into_place(src: Path, dst: Path) -> None:
    """Another file system (or no hard links): a copy, flushed, linked into place."""
    tmp = dst.with_name(f".{dst.name}.moving-{os.getpid()}")
    try:
        shutil.copy2(src, tmp, follow_symlinks=False)
        if not tmp.is_symlink():
            with tmp.open("rb") as fh:
                os.fsync(fh.fileno())
        try:
            os.link(tmp, dst, follow_symlinks=False)
        except FileExistsError:
            if not _same_bytes(src, dst):
                raise _conflict(src, dst) from None
    except OSError as exc:
        raise StateError(f"cannot move {src} to {dst}: {exc.strerror or exc}") from exc
    finally:
        tmp.unlink(missing_ok=True)


def _anchor_files(log: Path, home: Path) -> tuple[Path, Path]:
    from snodo.state.audit_checkpoint import slots  # noqa: PLC0415 the audit modules import this one

    key = hashlib.sha256(os.path.realpath(log).encode("utf-8", "surrogateescape")).hexdigest()[:16]
    return slots(home / "audit" / f"{key}.json")


def _move_anchor(old_log: Path, new_log: Path) -> None:
    """Give the moved log the checkpoint the home recorded for it at its old path (copied
    before the log moves: a crash between leaves a log that is checked, never one that is
    not), so a truncation before the move is still seen after it."""
    from snodo.state.audit import AuditLog  # noqa: PLC0415 the audit modules import this one

    home = AuditLog(old_log).home
    old_slots, new_slots = _anchor_files(old_log, home), _anchor_files(new_log, home)
    for src, dst in zip(old_slots, new_slots, strict=True):
        if not src.is_file():
            continue
        if dst.exists():
            if _same_bytes(src, dst):
                continue
            raise StateError(
                f"the home already records a checkpoint for {new_log} ({dst}) that differs from the one of {old_log}",
                hint=f"keep one log: move {old_log} aside once you know which is current; nothing was changed",
            )
        tmp = dst.with_name(f".{dst.name}.moving-{os.getpid()}")
        try:
            shutil.copyfile(src, tmp)
            os.chmod(tmp, 0o600)
            with contextlib.suppress(FileExistsError):  # another process copied the same bytes
                os.link(tmp, dst)
        except OSError as exc:
            raise StateError(f"cannot copy the audit checkpoint {src} to {dst}: {exc.strerror or exc}") from exc
        finally:
            tmp.unlink(missing_ok=True)
