"""Refused writes are evidence: an ``EROFS``/``EACCES`` reported in what a confined program
wrote becomes a ``sandbox_refusal`` audit event; from a test suite, only for the paths only
the sandbox refuses (:func:`governed`)."""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Sequence
from pathlib import PurePosixPath
from typing import Any

from attrs import frozen

MAX_REFUSALS = 20
_PATH_LIMIT = 300

# Python ("[Errno 30] Read-only file system: '/x'"), coreutils/shell ("/x: Read-only file
# system", "cannot create /x: Permission denied"), Node ("EROFS: read-only file system, open '/x'").
_PATTERNS = (
    re.compile(r"\[Errno (?:13|30)\] (?P<error>Read-only file system|Permission denied): '(?P<path>[^'\n]+)'"),
    re.compile(r"(?P<error>EROFS|EACCES)[:,][^'\n]*?'(?P<path>[^'\n]+)'"),
    re.compile(r"(?P<path>/[^\s:'\"]+): (?P<error>Read-only file system|Permission denied)"),
)


@frozen(kw_only=True)
class Refusal:
    path: str
    error: str  # "read-only file system" (EROFS) or "permission denied" (EACCES)


def _normal(error: str) -> str:
    return "read-only file system" if error.upper() in ("EROFS", "READ-ONLY FILE SYSTEM") else "permission denied"


def find_refusals(texts: Iterable[str]) -> tuple[Refusal, ...]:
    """The distinct refused writes reported in ``texts``, in order, at most :data:`MAX_REFUSALS`."""
    found: list[Refusal] = []
    for text in texts:
        for pattern in _PATTERNS:
            for match in pattern.finditer(text):
                refusal = Refusal(path=match["path"][:_PATH_LIMIT], error=_normal(match["error"]))
                if refusal not in found:
                    found.append(refusal)
                if len(found) >= MAX_REFUSALS:
                    return tuple(found)
    return tuple(found)


def governed(refusal: Refusal, protected: Sequence[str] = ()) -> bool:
    """Whether ``refusal`` names a path the sandbox keeps read-only: a ``.snodo`` or ``.git``
    component, or a protected path's components anywhere in it."""
    path = _joined(refusal.path)
    return any(want != "//" and want in path for want in map(_joined, (".snodo", ".git", *protected)))


def _joined(path: str) -> str:
    """``/a/b/`` for ``a/./b``: each component between slashes (none: ``//``, found nowhere)."""
    return f"/{'/'.join(p for p in PurePosixPath(path).parts if p not in ('/', '.'))}/"


def reported_by_tests(texts: Iterable[str], protected: Sequence[str] = ()) -> tuple[Refusal, ...]:
    return tuple(r for r in find_refusals(texts) if governed(r, protected))


def record_refusals(
    record: Callable[..., Any], refusals: Iterable[Refusal], *, who: str, task_id: str | None = None, **context: Any
) -> None:
    for refusal in refusals:
        record("sandbox_refusal", path=refusal.path, error=refusal.error, reported_by=who, task_id=task_id, **context)
