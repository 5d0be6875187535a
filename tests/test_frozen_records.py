"""Records handed across the plugin boundary are frozen all the way down."""

from __future__ import annotations

import copy
import json
import pickle
from pathlib import Path
from typing import Any

import pytest

from snodo.api import CoderRequest, CoderResult, Verdict
from snodo.base.frozen import FrozenDict, FrozenList, freeze, thaw


def _mutations(m: Any) -> list[Any]:
    return [
        lambda: m.__setitem__("new", 1),
        lambda: m.update(new=1),
        lambda: m.pop("outer"),
        m.clear,
        lambda: m.setdefault("new", 1),
        lambda: m["outer"].__setitem__("inner", 2),
        lambda: m["outer"]["items"].append(3),
        lambda: m["outer"]["items"].__setitem__(0, 9),
        m["outer"]["items"].sort,
    ]


def _records(given: dict[str, Any]) -> list[Any]:
    return [
        Verdict(severity="pass", justification="fine", details=given).details,
        CoderRequest(task_id="t", spec="s", workspace=Path("."), mode_id="m", config=given).config,
        CoderResult(usage=given).usage,
    ]


@pytest.mark.parametrize("which", [0, 1, 2], ids=["Verdict.details", "CoderRequest.config", "CoderResult.usage"])
def test_mutating_what_a_record_holds_raises(which: int) -> None:
    given = {"outer": {"inner": 1, "items": [1, 2]}}
    held = _records(given)[which]
    for mutate in _mutations(held):
        with pytest.raises(TypeError, match="read-only"):
            mutate()
    given["outer"]["inner"] = 99  # the caller's own dict stays the caller's: the record copied it
    assert held == {"outer": {"inner": 1, "items": [1, 2]}}


def test_frozen_values_still_read_serialise_and_copy_like_plain_ones() -> None:
    frozen = freeze({"a": [1, {"b": (2, [3])}], "c": {1, 2}})
    assert isinstance(frozen, FrozenDict) and isinstance(frozen["a"], FrozenList)
    assert frozen["c"] == frozenset({1, 2})
    assert json.loads(json.dumps({k: v for k, v in frozen.items() if k != "c"})) == {"a": [1, {"b": [2, [3]]}]}
    assert copy.deepcopy(frozen) is frozen and copy.copy(frozen) is frozen
    assert pickle.loads(pickle.dumps(frozen)) == frozen
    plain = thaw(frozen)
    assert type(plain) is dict and type(plain["a"]) is list and type(plain["a"][1]) is dict
    plain["a"].append(4)  # thawed values are the core's own, mutable copies
    assert frozen["a"] == [1, {"b": (2, [3])}]


def test_a_non_mapping_is_refused() -> None:
    with pytest.raises(TypeError, match="expected a mapping"):
        CoderResult(usage=[("a", 1)])  # type: ignore[arg-type]
