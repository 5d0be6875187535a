"""INV3's one home: when a set of validator results (as recorded) may be authorised by a human."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any


def authorisation_refusals(results: Iterable[Mapping[str, Any]], policy: Mapping[str, Any]) -> tuple[str, ...]:
    """Why a set of results may not be authorised (empty: it may). Fails closed: a result with an ``error``
    or neither ``pass`` nor ``warn`` is named; a policy counting a blocker or an error blocks on its own."""
    named = tuple(
        str(r.get("validator_id")) for r in results if r.get("error") or r.get("severity") not in ("pass", "warn")
    )
    if named:
        return named
    counted = [
        f"{n} {label}"
        for label, key in (("blocker(s)", "blocker_count"), ("validator error(s)", "error_count"))
        if (n := _count(policy.get(key)))
    ]
    return (f"the policy counted {' and '.join(counted)}",) if counted else ()


def _count(value: object) -> int:
    """A count from a stored policy summary; anything unreadable counts as one (fail closed)."""
    if isinstance(value, int) and not isinstance(value, bool) and value >= 0:
        return value
    return 0 if value is None or value == 0 else 1
