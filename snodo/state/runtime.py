"""A project's runtime state, ``<common git dir>/snodo/``: out of reach of ``git clean`` and of
confined processes (docs/architecture.md, "State"); an older snodo's, in ``.snodo/``, moves here once."""

from __future__ import annotations

import contextlib
import errno
import filecmp
import fnmatch
import os
import shutil
import sys
from pathlib import Path

from snodo.base.errors import EnvironmentProblem, StateError
from snodo.git.runner import pin, run_git
from snodo.state.home import made

#: Under the common git directory (a project below the work tree's top: ``snodo/projects/<path>``).
DIRNAME = "snodo"
#: What an older snodo kept in ``.snodo/`` (``.gitignore`` patterns): ``snodo protocol sign`` commits none.
LEGACY_RUNTIME = ("state.json", "jobs/", "*.lock", "plans/", "proposals/", "audit.log", "audit.log.*")

_FOUND: dict[Path, Path] = {}


def runtime_dir(project: Path) -> Path:
    """``project``'s runtime state directory, created (an older snodo's state moved in) if need be."""
    real = Path(os.path.realpath(project))
    known = _FOUND.get(real)
    if known is not None and known.is_dir():
        return known
    where, top = _locate(real)
    made(where, 0o777)
    moved = migrate(real / ".snodo", where, top)
    if moved:  # on stderr: stdout may be JSON or an MCP stream
        print(
            f"note: moved snodo's runtime state ({', '.join(moved)}) from {real / '.snodo'} to {where}, out of "
            "reach of `git clean`; `.snodo/` now holds only what is committed",
            file=sys.stderr,
            flush=True,
        )
    _FOUND[real] = where
    return where


def _locate(real: Path) -> tuple[Path, Path]:
    context = pin(real)
    if context is None:
        raise EnvironmentProblem(
            f"{real} is not a git repository: snodo keeps a project's runtime state (audit log, jobs, "
            "current mode) in its git directory, where `git clean` does not reach",
            hint="run `git init` in the project first",
        )
    common, top = context.common_dir(), context.work_tree
    if top in common.parents and common != top / ".git" and top / ".git" not in common.parents:
        # a git directory elsewhere in the working tree is not read-only to confined code
        raise EnvironmentProblem(
            f"the git directory of {top} is {common}, inside its working tree: snodo cannot keep its "
            "runtime state there out of confined processes' reach",
            hint="move the git directory to `.git` or outside the working tree",
        )
    where = common / DIRNAME
    return (where if real == top else where / "projects" / real.relative_to(top)), top


def audit_log_path(project: Path) -> Path:
    return runtime_dir(project) / "audit.log"


def _listdir(path: Path) -> list[str]:
    try:
        return sorted(os.listdir(path))
    except OSError as exc:
        raise StateError(f"cannot read {path}: {exc.strerror or exc}") from exc


def _legacy_names(old: Path) -> list[str]:
    """What an older snodo left in ``old`` but lock files (never moved: a process may hold one)."""
    if not old.is_dir():
        return []
    patterns = [p.rstrip("/") for p in LEGACY_RUNTIME]
    return [n for n in _listdir(old) if not n.endswith(".lock") and any(fnmatch.fnmatchcase(n, p) for p in patterns)]


def _tracked(top: Path, old: Path) -> frozenset[Path]:
    listing = run_git(top, "ls-files", "-z", "--", str(old))
    if not listing.ok:
        raise StateError(f"cannot list the files git tracks in {old}: {listing.detail()}")
    return frozenset(top / rel for rel in listing.stdout.split("\0") if rel)


def migrate(old: Path, new: Path, top: Path) -> list[str]:
    """Move what an older snodo kept in ``old`` (``<project>/.snodo``) into ``new``, but the files
    git tracks, the home's audit checkpoint first; the names moved. Each file is linked into
    place, then unlinked: a crash leaves it in one place or both, never lost."""
    names = _legacy_names(old)
    tracked = _tracked(top, old) if names else frozenset()
    moved: list[str] = []
    for name in names:
        src, dst = old / name, new / name
        if name == "audit.log" and src not in tracked:
            if os.path.lexists(dst) and not _same_bytes(src, dst):
                raise _conflict(src, dst)
            _move_anchor(src, dst)
        if _move(src, dst, tracked):
            moved.append(name + ("/" if f"{name}/" in LEGACY_RUNTIME else ""))
    return moved


def _same_bytes(a: Path, b: Path) -> bool:
    try:
        return filecmp.cmp(a, b, shallow=False)
    except OSError:
        return False


def _conflict(src: Path, dst: Path) -> StateError:
    return StateError(
        f"snodo's runtime state is in two places: {src} (kept there by an older snodo) and {dst} differ",
        hint=f"keep one: move {src} aside (or remove it) once you know which is current; nothing was changed",
    )


def _move(src: Path, dst: Path, tracked: frozenset[Path]) -> bool:
    """Move ``src`` (a file or a tree) to ``dst`` but ``tracked`` files; whether anything moved."""
    if src.is_symlink() or not src.is_dir():
        return src not in tracked and _move_file(src, dst)
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


def _move_file(src: Path, dst: Path) -> bool:
    if not _place(src, dst):
        return False
    try:
        src.unlink(missing_ok=True)
    except OSError as exc:
        raise StateError(f"cannot remove {src} after moving it to {dst}: {exc.strerror or exc}") from exc
    return True


def _place(src: Path, dst: Path) -> bool:
    """Link ``src`` to ``dst`` (a flushed copy where links fail); False if another process moved it first."""
    try:
        os.link(src, dst, follow_symlinks=False)
        return True
    except FileNotFoundError:
        return False
    except FileExistsError:
        symlinked = src.is_symlink() or dst.is_symlink()
    except OSError as exc:
        if exc.errno not in (errno.EXDEV, errno.EPERM, errno.EMLINK, errno.ENOTSUP):
            raise StateError(f"cannot move {src} to {dst}: {exc.strerror or exc}") from exc
        if _copy_into_place(src, dst, f"cannot move {src} to {dst}"):
            return True
        symlinked = False
    if symlinked or not _same_bytes(src, dst):  # what is there already must be the same file
        raise _conflict(src, dst)
    return True


def _copy_into_place(src: Path, dst: Path, failure: str, *, mode: int | None = None) -> bool:
    """False if ``dst`` exists."""
    tmp = dst.with_name(f".{dst.name}.moving-{os.getpid()}")
    try:
        shutil.copy2(src, tmp, follow_symlinks=False)
        if mode is not None:
            os.chmod(tmp, mode)
        if not tmp.is_symlink():
            with tmp.open("rb") as fh:
                os.fsync(fh.fileno())
        os.link(tmp, dst, follow_symlinks=False)
    except FileExistsError:
        return False
    except OSError as exc:
        raise StateError(f"{failure}: {exc.strerror or exc}") from exc
    finally:
        tmp.unlink(missing_ok=True)
    return True


def _move_anchor(old_log: Path, new_log: Path) -> None:
    """Give the moved log the home's checkpoint of its old path, so a truncation before the
    move is still seen (copied first: a crash between leaves a log that is checked)."""
    from snodo.state.audit import AuditLog  # noqa: PLC0415 loaded only when an older snodo's log moves
    from snodo.state.audit_chain import slots  # noqa: PLC0415 loaded only when an older snodo's log moves

    for src, dst in zip(slots(AuditLog(old_log).anchor_path), slots(AuditLog(new_log).anchor_path), strict=True):
        if not src.is_file() or _same_bytes(src, dst):
            continue
        if dst.exists():
            raise StateError(
                f"the home already records a checkpoint for {new_log} ({dst}) that differs from the one of {old_log}",
                hint=f"keep one log: move {old_log} aside once you know which is current; nothing was changed",
            )
        # False (ignored) when another process copied the same bytes first
        _copy_into_place(src, dst, f"cannot copy the audit checkpoint {src} to {dst}", mode=0o600)
