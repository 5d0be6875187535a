"""Values frozen all the way down: what the core hands a plugin, and what a plugin hands
back, cannot be changed by the other side (protocol models and plugin records alike)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Self


def _read_only(self: object, *_args: object, **_kwargs: object) -> None:
    raise TypeError(f"this {type(self).__name__} is read-only: snodo's records are frozen all the way down")


class _Frozen:
    """Copies of a frozen value are the value itself; a pickled one comes back frozen."""

    __slots__ = ()

    def __copy__(self) -> Self:
        return self

    def __deepcopy__(self, _memo: object) -> Self:
        return self

    def __reduce__(self) -> tuple[Any, ...]:
        return (freeze, (thaw(self),))


class FrozenDict(_Frozen, dict[str, Any]):
    """A ``dict`` that refuses every change. Still a ``dict`` (JSON, ``==`` and ``isinstance``
    work as before), so plugins read it as they always did but cannot alter it."""

    __slots__ = ()
    __setitem__ = __delitem__ = clear = pop = popitem = setdefault = update = __ior__ = _read_only  # type: ignore[assignment]


class FrozenList(_Frozen, list[Any]):
    """A ``list`` that refuses every change (compares equal to the plain list it was)."""

    __slots__ = ()
    __setitem__ = __delitem__ = append = extend = insert = pop = remove = clear = sort = reverse = _read_only
    __iadd__ = __imul__ = _read_only  # type: ignore[assignment]


def freeze(value: Any) -> Any:
    """A deep, read-only copy of ``value``: mappings become :class:`FrozenDict`, lists
    :class:`FrozenList`, sets frozensets, tuples tuples of frozen items; the rest stays."""
    if isinstance(value, FrozenDict | FrozenList):
        return value
    if isinstance(value, Mapping):
        return FrozenDict({k: freeze(v) for k, v in value.items()})
    if isinstance(value, list):
        return FrozenList(freeze(v) for v in value)
    if isinstance(value, tuple) and type(value) is tuple:
        return tuple(freeze(v) for v in value)
    if isinstance(value, set | frozenset):
        return frozenset(value)
    return value


def thaw(value: Any) -> Any:
    """Plain, mutable ``dict``/``list`` copies of a frozen value (for the core's own records)."""
    if isinstance(value, Mapping):
        return {k: thaw(v) for k, v in value.items()}
    if isinstance(value, list):
        return [thaw(v) for v in value]
    if type(value) is tuple:
        return tuple(thaw(v) for v in value)
    return value
