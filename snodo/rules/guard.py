"""The one path guard every tool-surface mutation goes through (INV2, ADR 026; what it refuses:
docs/security.md). Both a path's *spelling* (each component NFKC-normalised, casefolded,
without the trailing dots, spaces and ``:stream`` Windows ignores) and its *resolution*
(``realpath``, of the entry and of what it points to) must pass."""

from __future__ import annotations

import os
import re
import sys
import unicodedata
from collections.abc import Sequence
from fnmatch import fnmatchcase
from pathlib import Path

from snodo.base.errors import PathValidationError

REASON_EMPTY = "the path is empty"
REASON_NOT_TEXT = "a path must be a string"
REASON_CHARACTER = "the path contains a NUL, control or invisible character"
REASON_WINDOWS = "backslashes, drive letters and UNC prefixes are refused; use a root-relative POSIX path"
REASON_DOTS = "a path component made only of dots, spaces or a ':stream' suffix is ambiguous"
REASON_OUTSIDE = "the path escapes the project root"
REASON_ROOT = "the project root itself cannot be mutated"
REASON_SNODO = (
    "`.snodo/` is protected: governance state cannot be changed through the tool surface (see docs/architecture.md)"
)
REASON_GIT = "`.git/` is protected: repository internals cannot be changed through the tool surface"
REASON_GITLINK = (
    "a nested repository (a directory holding `.git`, staged as a gitlink) cannot be staged or committed: "
    "git would read its configuration"
)
REASON_INTERPRETER = (
    "a Python environment is protected: a `.pth` file or a replaced interpreter there would run outside the "
    "sandbox in the next `python`"
)
REASON_PROTECTED = "protected by the protocol's protected_paths pattern {pattern!r}"

# Code points that render as nothing (zero-width joiners, fillers, variation selectors):
# an agent has no business naming a file with them, and they make look-alikes of `.snodo`.
_INVISIBLE = re.compile(
    "[\u00ad\u034f\u115f\u1160\u17b4\u17b5\u180b-\u180f\u3164\ufe00-\ufe0f\uffa0\U000e0100-\U000e01ef]"
)
_DRIVE = re.compile(r"^[A-Za-z]:")
# NTFS 8.3 short names: `.snodo` is also reachable as `SNODO~1` there.
_SHORT_NAME = re.compile(r"^(snodo|git)~\d+$")
_RESERVED = {".snodo": REASON_SNODO, ".git": REASON_GIT}
_VENV_NAMES = frozenset({".venv", "venv"})
_ENV_MARKERS = ("pyvenv.cfg", "conda-meta")


def name_key(component: str) -> str:
    """The identity a file system that folds case, Unicode or Windows quirks gives a name."""
    key = unicodedata.normalize("NFKC", unicodedata.normalize("NFKC", component).casefold())
    return key.split(":", 1)[0].rstrip(" .")


def _check_name(path: str, component: str) -> None:
    key = name_key(component)
    short = _SHORT_NAME.match(key)
    reason = _RESERVED.get(f".{short[1]}" if short else key)
    if reason is None and not key and component not in ("", ".", ".."):
        reason = REASON_DOTS
    if reason:
        raise PathValidationError(path, reason)


def _matches(pattern: tuple[str, ...], parts: tuple[str, ...]) -> bool:
    """Whether a leading run of ``parts`` matches ``pattern`` (``**``: any number of components)."""
    if not pattern:
        return True
    head, rest = pattern[0], pattern[1:]
    if head == "**":
        return any(_matches(rest, parts[i:]) for i in range(len(parts) + 1))
    return bool(parts) and fnmatchcase(parts[0], head) and _matches(rest, parts[1:])


def protecting_prefix(patterns: Sequence[tuple[str, ...]], parts: tuple[str, ...]) -> tuple[str, ...] | None:
    """The shortest leading run of ``parts`` one of ``patterns`` protects, or ``None``: what the
    sandbox makes read-only as one piece."""
    keys = tuple(name_key(part) for part in parts)
    keyed = [tuple(name_key(seg) for seg in pattern) for pattern in patterns]
    for i in range(1, len(parts) + 1):
        if any(_matches(pattern, keys[:i]) for pattern in keyed):
            return parts[:i]
    return None


class PathGuard:
    """Whether a path may be read or mutated through the tool surface; ``protected_paths``: root-relative globs."""

    def __init__(self, root: Path, protected_paths: Sequence[str] = ()) -> None:
        self.root = Path(os.path.realpath(root))
        # absolute spellings are spell-checked only below the root (its ancestors are not the agent's doing)
        self._root_spellings = {os.path.abspath(root), str(self.root)}
        self._patterns = tuple(
            (raw, tuple(name_key(seg) for seg in raw.split("/") if seg not in ("", "."))) for raw in protected_paths
        )

    def check_read(self, path: str) -> Path:
        """Resolve ``path`` for reading: anywhere inside the root, ``.snodo/`` included (ADR 026)."""
        self._check_characters(path)
        target = self._resolve(path, follow_symlinks=True)
        self._inside(path, target)
        return target

    def check_mutation(self, path: str, *, follow_symlinks: bool = True) -> Path:
        """The absolute target a mutation of ``path`` may touch, else :class:`PathValidationError`;
        ``follow_symlinks=False`` returns the entry (its parents resolved), which deleting or
        staging a symlink acts on. Both are checked."""
        self._check_characters(path)
        for component in self._spelled_components(path):
            _check_name(path, component)
        entry = self._resolve(path, follow_symlinks=False)
        target = self._resolve(path, follow_symlinks=True)
        # Resolving the spelled path and resolving the entry can disagree (a symlink loop
        # earlier in the path stops realpath short), so what the entry leads to is checked too.
        for resolved in (entry, target, self._resolve(str(entry), follow_symlinks=True)):
            parts = self._inside(path, resolved)
            if not parts:
                raise PathValidationError(path, REASON_ROOT)
            for part in parts:
                _check_name(path, part)
            keys = tuple(name_key(part) for part in parts)
            self._check_interpreter(path, resolved, keys)
            for raw, pattern in self._patterns:
                if _matches(pattern, keys):
                    raise PathValidationError(path, REASON_PROTECTED.format(pattern=raw))
        return target if follow_symlinks else entry

    def _check_interpreter(self, path: str, resolved: Path, keys: tuple[str, ...]) -> None:
        if keys[0] in _VENV_NAMES:
            raise PathValidationError(path, REASON_INTERPRETER)
        own = Path(os.path.realpath(sys.prefix))
        if own != Path(os.path.realpath(sys.base_prefix)) and (resolved == own or own in resolved.parents):
            raise PathValidationError(path, REASON_INTERPRETER)
        directory = resolved
        while directory != self.root and self.root in directory.parents:
            if any(os.path.lexists(directory / marker) for marker in _ENV_MARKERS):
                raise PathValidationError(path, REASON_INTERPRETER)
            directory = directory.parent

    @staticmethod
    def _check_characters(path: str) -> None:
        if not isinstance(path, str):
            raise PathValidationError(repr(path), REASON_NOT_TEXT)
        if not path.strip():
            raise PathValidationError(path, REASON_EMPTY)
        if _INVISIBLE.search(path) or any(unicodedata.category(ch) in ("Cc", "Cf", "Cs", "Zl", "Zp") for ch in path):
            raise PathValidationError(path, REASON_CHARACTER)
        if "\\" in path or _DRIVE.match(path):
            raise PathValidationError(path, REASON_WINDOWS)

    def _spelled_components(self, path: str) -> list[str]:
        for prefix in self._root_spellings:
            if path == prefix or path.startswith(prefix.rstrip("/") + "/"):
                return path[len(prefix) :].split("/")
        return path.split("/")

    def _resolve(self, path: str, *, follow_symlinks: bool) -> Path:
        candidate = Path(path) if os.path.isabs(path) else self.root / path
        try:
            if follow_symlinks or candidate.name in ("", ".."):
                return Path(os.path.realpath(candidate))
            return Path(os.path.realpath(candidate.parent)) / candidate.name
        except (OSError, ValueError) as exc:
            raise PathValidationError(path, f"the path cannot be resolved: {exc}") from None

    def _inside(self, path: str, resolved: Path) -> tuple[str, ...]:
        try:
            return resolved.relative_to(self.root).parts
        except ValueError:
            raise PathValidationError(path, REASON_OUTSIDE) from None
