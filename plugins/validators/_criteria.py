"""Acceptance criteria: where they come from, and which of them a machine can check.

Criteria are the validator's own ``criteria`` plus the bullets under the spec's
"Acceptance criteria" or "Done when" section (a markdown heading, or a line ending in
``:``). A criterion in one of a few fixed shapes is checked against the tree:

- ``file `PATH` exists`` / ``` `PATH` exists``` (also "is present", "is created"),
- ``` `PATH` does not exist``` (also "is removed", "is deleted"),
- ``function `NAME` is defined`` / ``` `NAME` is defined [in `FILE`]``` /
  ``` `FILE` defines `NAME` ``` (a ``def``, ``class`` or assignment in the Python files),
- ``tests pass`` / ``all tests pass`` / ``the test suite passes``.

Anything else is prose: only a model can judge it. Shapes are matched whole, so a
compound sentence is never half-checked and reported as met.
"""

from __future__ import annotations

import functools
import re
from pathlib import Path
from typing import Literal, NamedTuple

from .._files import inside, read_text, walk

Kind = Literal["exists", "absent", "defined", "tests"]

_SECTION_TITLES = ("acceptance criteria", "done when")
_BULLET = r"^\s*(?:[-*+]|\d+[.)])\s+(?:\[[ xX]\]\s+)?(?P<text>.+)$"
_SUBJECT = r"(?:(?:a|an|the)\s+)?(?:(?:file|directory|folder|dir|test file|module)\s+)?`(?P<target>[^`]+)`"
_NAME = (
    r"(?:(?:a|an|the)\s+)?(?:(?:function|class|method|constant|variable|name)\s+)?"
    r"`(?P<name>[A-Za-z_]\w*)(?:\(\))?`"
)


@functools.cache
def _shapes() -> tuple[tuple[Kind, re.Pattern[str]], ...]:
    """The shapes a machine can check, compiled on first use: a run whose protocol has no
    acceptance validator never pays for them (#26)."""
    return (
        ("defined", re.compile(rf"{_NAME}\s+is\s+(?:defined|implemented)(?:\s+in\s+`(?P<file>[^`]+)`)?", re.I)),
        ("defined", re.compile(r"`(?P<file>[^`]+\.py)`\s+defines\s+" + _NAME, re.I)),
        (
            "defined",
            re.compile(
                r"(?:(?:a|an|the)\s+)?(?:function|class|method)\s+`(?P<name>[A-Za-z_]\w*)(?:\(\))?`"
                r"\s+exists",
                re.I,
            ),
        ),
        (
            "exists",
            re.compile(rf"(?:there\s+is\s+)?{_SUBJECT}\s+(?:exists|is\s+present|is\s+created|is\s+added)", re.I),
        ),
        (
            "absent",
            re.compile(rf"{_SUBJECT}\s+(?:does\s+not\s+exist|is\s+removed|is\s+deleted|no\s+longer\s+exists)", re.I),
        ),
        (
            "tests",
            re.compile(
                r"(?:all\s+(?:the\s+)?)?(?:unit\s+)?tests\s+(?:pass|are\s+passing|succeed|are\s+green)"
                r"|(?:the\s+)?(?:test\s+suite|pytest)\s+(?:passes|succeeds|is\s+green)",
                re.I,
            ),
        ),
    )


class Criterion(NamedTuple):
    text: str
    source: str  # "validator" or "spec"


class Check(NamedTuple):
    kind: Kind
    target: str = ""
    file: str | None = None


def _title(line: str) -> tuple[str, str] | None:
    """(title, inline rest) when ``line`` opens an acceptance section, else None."""
    stripped = line.strip()
    heading = stripped.startswith("#")
    text = stripped.lstrip("#").strip().strip("*_").strip()
    head, colon, rest = text.partition(":")
    head = head.strip().strip("*_").strip().lower()
    if head in _SECTION_TITLES and (heading or colon):
        return head, rest.strip().strip("*_").strip()
    return None


def from_spec(spec: str) -> list[str]:
    """The bullets of every "Acceptance criteria" / "Done when" section of the spec."""
    found: list[str] = []
    in_section = False
    for line in spec.splitlines():
        opened = _title(line)
        if opened is not None:
            in_section = True
            if opened[1]:
                found.append(opened[1])
            continue
        if not in_section or not line.strip():
            continue
        bullet = re.match(_BULLET, line)
        if bullet:
            found.append(bullet.group("text").strip())
        elif line[:1].isspace() and found:
            found[-1] = f"{found[-1]} {line.strip()}"
        else:
            in_section = False
    return found


def gather(validator_criteria: tuple[str, ...], spec: str) -> list[Criterion]:
    items = [Criterion(c.strip(), "validator") for c in validator_criteria if c.strip()]
    items += [Criterion(c, "spec") for c in from_spec(spec)]
    return items


def classify(text: str) -> Check | None:
    """The mechanical check a criterion asks for, or None for prose."""
    sentence = text.strip().rstrip(".;").strip()
    for kind, shape in _shapes():
        match = shape.fullmatch(sentence)
        if match:
            groups = match.groupdict()
            return Check(kind=kind, target=groups.get("target") or groups.get("name") or "", file=groups.get("file"))
    return None


def exists(workspace: Path, target: str) -> bool:
    path = inside(workspace, target.strip())
    return path is not None and path.exists()


def definition_site(workspace: Path, name: str, file: str | None) -> str | None:
    """The first Python file defining ``name`` (def, class or assignment), or None."""
    pattern = re.compile(
        rf"^\s*(?:(?:async\s+)?def|class)\s+{re.escape(name)}\b|^\s*{re.escape(name)}\s*(?::[^=\n]*)?=(?!=)",
        re.MULTILINE,
    )
    candidates = [file] if file else [p for p in walk(workspace) if p.endswith(".py")]
    for rel in candidates:
        text = read_text(workspace, rel, 2_000_000)
        if text is not None and pattern.search(text):
            return rel
    return None
