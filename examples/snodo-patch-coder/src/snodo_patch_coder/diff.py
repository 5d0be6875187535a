"""Unified diffs: finding them in a task spec, and applying them to file contents.

Strict on purpose: a hunk whose context does not match the file is an error naming the
file and the hunk, never a guess. Pure Python, no ``patch`` program.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field

_FENCE = re.compile(r"^```(?:diff|patch)[ \t]*\n(.*?)^```", re.DOTALL | re.MULTILINE)
_HUNK = re.compile(r"^@@ -(\d+)(?:,(\d+))? \+(\d+)(?:,(\d+))? @@")
NO_EOL = "\\ No newline at end of file"
DEV_NULL = "/dev/null"


class DiffError(ValueError):
    """The diff cannot be read or does not apply."""


@dataclass
class Hunk:
    old_start: int
    old_count: int
    new_count: int
    lines: list[str] = field(default_factory=list)  # each with its ' ', '-' or '+' prefix
    old_no_eol: bool = False
    new_no_eol: bool = False

    def old(self) -> list[str]:
        return [line[1:] for line in self.lines if line[:1] in (" ", "-")]

    def new(self) -> list[str]:
        return [line[1:] for line in self.lines if line[:1] in (" ", "+")]

    def done(self) -> bool:
        return len(self.old()) >= self.old_count and len(self.new()) >= self.new_count


@dataclass
class FilePatch:
    old_path: str | None  # None: the file is created
    new_path: str | None  # None: the file is deleted
    hunks: list[Hunk] = field(default_factory=list)

    @property
    def path(self) -> str:
        return self.new_path or self.old_path or "?"


def fenced_diffs(spec: str) -> str:
    """Every ```diff (or ```patch) block of the spec, joined."""
    return "".join(match.group(1) for match in _FENCE.finditer(spec))


def _path(header: str, strip: int | None) -> str | None:
    name = header.split("\t", 1)[0].strip()
    if name == DEV_NULL:
        return None
    if strip is None:  # git style: drop the a/ or b/ prefix when there is one
        return name[2:] if name.startswith(("a/", "b/")) else name
    parts = name.split("/")
    if len(parts) <= strip:
        raise DiffError(f"cannot strip {strip} leading component(s) from {name!r}")
    return "/".join(parts[strip:])


def parse(text: str, strip: int | None = None) -> list[FilePatch]:
    """The file patches of a unified diff; anything that is not one is an error."""
    patches: list[FilePatch] = []
    lines = iter(text.splitlines())
    current: FilePatch | None = None
    hunk: Hunk | None = None
    for line in lines:
        if line.startswith("--- ") and (hunk is None or hunk.done()):
            plus = next(lines, "")
            if not plus.startswith("+++ "):
                raise DiffError(f"'{line}' is not followed by a '+++' header")
            current = FilePatch(old_path=_path(line[4:], strip), new_path=_path(plus[4:], strip))
            if current.old_path is None and current.new_path is None:
                raise DiffError("a file patch goes from /dev/null to /dev/null")
            patches.append(current)
            hunk = None
        elif (match := _HUNK.match(line)) is not None:
            if current is None:
                raise DiffError(f"hunk '{line}' comes before any '---'/'+++' header")
            hunk = Hunk(
                old_start=int(match.group(1)), old_count=int(match.group(2) or 1), new_count=int(match.group(4) or 1)
            )
            current.hunks.append(hunk)
        elif line == NO_EOL and hunk is not None and hunk.lines:
            if hunk.lines[-1][:1] == "-":
                hunk.old_no_eol = True
            elif hunk.lines[-1][:1] == "+":
                hunk.new_no_eol = True
            else:
                hunk.old_no_eol = hunk.new_no_eol = True
        elif hunk is not None and line[:1] in (" ", "-", "+") and not hunk.done():
            hunk.lines.append(line)
        elif hunk is not None and line == "" and not hunk.done():
            hunk.lines.append(" ")  # editors strip the space of an empty context line
        elif line.startswith(("diff ", "index ", "new file mode", "deleted file mode", "similarity")) or not line:
            continue
        else:
            raise DiffError(f"unexpected line in the diff: {line!r}")
    for patch in patches:
        if not patch.hunks:
            raise DiffError(f"the patch of {patch.path!r} has no hunk")
        for h in patch.hunks:
            if not h.done():
                raise DiffError(
                    f"a hunk of {patch.path!r} is cut short: expected {h.old_count} old and "
                    f"{h.new_count} new line(s), got {len(h.old())} and {len(h.new())}"
                )
    return patches


def _find(lines: list[str], wanted: list[str], hint: int) -> int | None:
    """Where ``wanted`` starts in ``lines``: at the hint, else the nearest match."""
    if not wanted:
        return min(max(hint, 0), len(lines))
    candidates = range(len(lines) - len(wanted) + 1)
    for start in sorted(candidates, key=lambda i: abs(i - hint)):
        if lines[start : start + len(wanted)] == wanted:
            return start
    return None


def apply(patch: FilePatch, original: str | None) -> str | None:
    """The new content of the patched file (None: deleted); ``original`` is None for a new file."""
    if patch.old_path is None and original is not None:
        raise DiffError(f"{patch.path!r} is created by the diff but already exists")
    if patch.old_path is not None and original is None:
        raise DiffError(f"{patch.old_path!r} is patched by the diff but does not exist")
    lines = (original or "").splitlines()
    trailing_newline = original is None or original.endswith("\n") or original == ""
    offset = 0
    for hunk in patch.hunks:
        start = _find(lines, hunk.old(), hunk.old_start - 1 + offset)
        if start is None:
            raise DiffError(f"a hunk of {patch.path!r} (at old line {hunk.old_start}) does not match the file")
        lines[start : start + len(hunk.old())] = hunk.new()
        offset += len(hunk.new()) - len(hunk.old())
        if hunk.new_no_eol:
            trailing_newline = False
        elif hunk.old_no_eol:
            trailing_newline = True
    if patch.new_path is None:
        if lines:
            raise DiffError(f"{patch.old_path!r} is deleted by the diff but lines of it remain")
        return None
    text = "\n".join(lines)
    return text + "\n" if lines and trailing_newline else text


def apply_all(patches: list[FilePatch], read: Callable[[str], str | None]) -> Iterator[tuple[str, str | None]]:
    """(path, new content or None for a delete) for every file patch, reading originals with ``read``."""
    for patch in patches:
        original = read(patch.old_path) if patch.old_path is not None else None
        new = apply(patch, original)
        if patch.new_path is None:
            yield patch.old_path or "?", None
        else:
            if patch.old_path is not None and patch.old_path != patch.new_path:
                yield patch.old_path, None  # a rename: the old name goes away
            yield patch.new_path, new
