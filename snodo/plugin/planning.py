"""The planner contract (what ``snodo_planner`` returns) and the core's deterministic planner."""

from __future__ import annotations

import re
from typing import Protocol

from attrs import frozen

from snodo.base.errors import ToolError

MAX_TASKS = 50

_BULLET = re.compile(r"^\s*(?:[-*+\u2022]|\d+[.)])\s+(?:\[[ xX]\]\s+)?(?P<text>\S.*?)\s*$")
_SENTENCE_END = re.compile(r"(?<=[.!?;])\s+")
_AND = re.compile(r",?\s+(?:and\s+then|and|then)\s+", re.IGNORECASE)
_CONNECTIVE = re.compile(r"^(?:and\s+|then\s+|also\s+|finally\s+|next\s+|first\s+)+", re.IGNORECASE)
_ARTICLE = re.compile(r"^(?:a|an|the|some|another)\b", re.IGNORECASE)


def _clean(item: str) -> str:
    text = _CONNECTIVE.sub("", " ".join(item.split())).strip().rstrip(".;:!?,").strip()
    return text[:1].upper() + text[1:]


def _split_and(sentence: str) -> list[str]:
    """Clauses joined by "and"/"then", when each stands on its own: "add a greet function and
    a farewell function" gives two (the second borrowing the verb); "read and write files" one."""
    parts = [p.strip() for p in _AND.split(sentence) if p.strip()]
    if len(parts) < 2 or any(len(p.split()) < 2 for p in parts):
        return [sentence]
    verb = parts[0].split()[0]
    return [parts[0], *(f"{verb} {p}" if _ARTICLE.match(p) else p for p in parts[1:])]


def split_goal(goal: str) -> list[str]:
    """The deterministic decomposition: bullet lines, else sentences, else "and" clauses."""
    items = [m.group("text") for line in goal.splitlines() if (m := _BULLET.match(line))]
    if not items:
        items = [s for s in _SENTENCE_END.split(" ".join(goal.split())) if s.strip()]
        if len(items) == 1:
            items = _split_and(items[0])
    unique: dict[str, str] = {}  # the first spelling of each task, compared without case
    for text in filter(None, map(_clean, items)):
        unique.setdefault(text.casefold(), text)
    if not unique:
        raise ToolError("the goal is empty: there is nothing to decompose")
    if len(unique) > MAX_TASKS:
        raise ToolError(f"the goal splits into {len(unique)} tasks; at most {MAX_TASKS} fit in one plan")
    return list(unique.values())


def deterministic_spec(task: str) -> str:
    """Exactly what the task line says: the validators would judge an added criterion as meant."""
    text = _clean(task)
    if not text:
        raise ToolError("the task is empty: there is nothing to write a spec for")
    return f"{text}.\n"


class PlannerImpl(Protocol):
    """What a ``snodo_planner`` hook returns (its hookspec says what each member does)."""

    @property
    def name(self) -> str: ...

    def tasks(self, goal: str) -> list[dict[str, str]]: ...

    def spec(self, task: str, context: str | None = None) -> str: ...


@frozen
class DeterministicPlanner:
    """The core's planner, without a model: bullets, else sentences, else "and" clauses."""

    name: str = "deterministic"

    def tasks(self, goal: str) -> list[dict[str, str]]:
        return [{"title": t, "spec": deterministic_spec(t)} for t in split_goal(goal)]

    def spec(self, task: str, context: str | None = None) -> str:
        return deterministic_spec(task)
