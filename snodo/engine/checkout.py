"""The user's checkout, read without touching it: the commit a run starts from and what is
left uncommitted there."""

from __future__ import annotations

import os
import threading
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path

from snodo.git.runner import is_commit_id, pin, run_git

#: HEAD's commit and the paths left uncommitted (:func:`look_at_checkout`).
_Look = tuple[str | None, list[str]]


def _beside(func: Callable[[Path], _Look], repo: Path) -> Future[_Look]:
    executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="snodo-beside")
    try:
        return executor.submit(func, repo)
    finally:
        executor.shutdown(wait=False)  # the thread ends with its one call


#: The looks started ahead (:func:`look_ahead`), by checkout.
_AHEAD: dict[str, Future[_Look]] = {}
_AHEAD_LOCK = threading.Lock()


def look_ahead(repo: Path) -> None:
    """Start :func:`look_at_checkout` while ``snodo run`` loads what leaves the CPU idle; :func:`looking` takes it."""
    with _AHEAD_LOCK:
        key = os.path.realpath(repo)
        if key not in _AHEAD:
            _AHEAD[key] = _beside(look_at_checkout, Path(key))


def looking(repo: Path) -> Future[_Look]:
    """The look at ``repo`` started ahead for this run, or one started now."""
    with _AHEAD_LOCK:
        ahead = _AHEAD.pop(os.path.realpath(repo), None)
    return ahead if ahead is not None else _beside(look_at_checkout, repo)


def rev(repo: Path, name: str) -> str | None:
    result = run_git(repo, "rev-parse", "--verify", "-q", f"{name}^{{commit}}")
    return (result.stdout.strip() or None) if result.ok else None


def look_at_checkout(repo: Path) -> tuple[str | None, list[str]]:
    """HEAD's commit (``None``: none yet) and the paths uncommitted in the checkout (``.snodo`` aside): one status."""
    # No preload threads: it runs beside the run, whose own processes need the CPUs more.
    args = ("--no-optional-locks", "-c", "core.preloadIndex=false", "status", "--porcelain=v2", "--branch")
    found = run_git(repo, *args, "--no-ahead-behind", "-z", "--", ".", ":!.snodo")
    if not found.ok:  # the run can still start from HEAD; nothing to report
        return rev(repo, "HEAD"), []
    head: str | None = None
    paths: list[str] = []
    records = iter(found.stdout.split("\0"))
    for record in records:
        kind = record[:2]
        if record.startswith("# branch.oid "):
            oid = record.removeprefix("# branch.oid ").strip()
            head = None if oid == "(initial)" else oid
        elif kind in _FIELDS:
            paths.append(record.split(" ", _FIELDS[kind])[-1])
            if kind == "2 ":
                next(records, None)  # a rename's source path follows
    return head, paths


#: How many spaces precede the path in each kind of ``status --porcelain=v2`` record.
_FIELDS = {"1 ": 8, "2 ": 9, "u ": 10, "? ": 1}


def read_head(repo: Path) -> str | None:
    """HEAD's commit read from the user's git directory (no wait for the ``status``); ``None``
    for anything but a detached commit id or a loose branch ref inside ``refs/``."""
    context = pin(repo)
    if context is None:
        return None
    try:
        with open(context.git_dir / "HEAD", encoding="ascii") as fh:
            text = fh.read(300).strip()
        if text.startswith("ref: refs/heads/"):
            name = text.removeprefix("ref: ")
            if ".." in name or "\\" in name:
                return None
            with open(context.common_dir() / name, encoding="ascii") as fh:
                text = fh.read(100).strip()
    except (OSError, UnicodeDecodeError, ValueError):
        return None
    return text if is_commit_id(text) else None
