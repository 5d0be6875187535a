"""attrs classes whose ``__eq__``, ``__hash__`` and ``__repr__`` are shared, not generated.

attrs writes the source of every method of every class it builds and compiles it when the
class is defined. Equality, hashing and repr are most of that text; for the ~90 classes a
governed run imports, compiling them was ~25 ms of every ``snodo`` process (#26), paid
before any work starts. :func:`frozen` and :func:`define` are attrs' own decorators, with
the same arguments; the class gets attrs' ``__init__`` (defaults, converters, validators,
slots) and three functions shared by every class instead, which read the class's fields
once (:func:`_plan`) and then behave as attrs' generated methods do:

* ``==`` compares instances of the very same class field by field (``eq=False`` fields
  left out, an ``eq`` key applied), anything else is ``NotImplemented``;
* a frozen class hashes by the same fields (``hash=False`` left out), a mutable one with
  equality is unhashable;
* ``repr`` is ``Name(field=value, ...)`` (``repr=False`` fields left out, a ``repr``
  callable applied), ``...`` for an instance already being shown (a cycle).

A class that defines any of these itself, or asks attrs for what the shared functions do
not cover (``order``, ``cache_hash``, ``unsafe_hash``/``hash``, ``str``, explicit
``eq``/``repr``), is built by attrs alone. Type checkers see attrs' decorators.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import attrs

#: Decorator arguments whose meaning the shared functions do not reproduce.
_ATTRS_ONLY = frozenset({"order", "cache_hash", "unsafe_hash", "hash", "str", "eq", "repr"})

_Plan = tuple[
    tuple[tuple[str, Callable[[Any], Any] | None], ...],  # equality: name, key
    tuple[tuple[str, Callable[[Any], Any] | None], ...],  # hash: name, key
    tuple[tuple[str, Callable[[Any], str]], ...],  # repr: name, how
]
_PLANS: dict[type, _Plan] = {}
_SHOWING = threading.local()


def _plan(cls: type) -> _Plan:
    plan = _PLANS.get(cls)
    if plan is None:
        fields = attrs.fields(cls)
        eq = tuple((a.name, a.eq_key) for a in fields if a.eq)
        hashed = tuple((a.name, a.eq_key) for a in fields if (a.eq if a.hash is None else a.hash))
        shown = tuple((a.name, a.repr if callable(a.repr) else repr) for a in fields if a.repr)
        plan = _PLANS[cls] = (eq, hashed, shown)
    return plan


def _values(obj: Any, fields: tuple[tuple[str, Callable[[Any], Any] | None], ...]) -> tuple[Any, ...]:
    return tuple(key(getattr(obj, name)) if key else getattr(obj, name) for name, key in fields)


def _eq(self: Any, other: Any) -> Any:  # a bool, or NotImplemented
    if other.__class__ is not self.__class__:
        return NotImplemented
    fields = _plan(self.__class__)[0]
    return bool(_values(self, fields) == _values(other, fields))


def _hash(self: Any) -> int:
    return hash((self.__class__, *_values(self, _plan(self.__class__)[1])))


def _repr(self: Any) -> str:
    showing: set[int] | None = getattr(_SHOWING, "ids", None)
    if showing is None:
        showing = _SHOWING.ids = set()
    if id(self) in showing:
        return "..."
    showing.add(id(self))
    try:
        items = ", ".join(f"{name}={how(getattr(self, name))}" for name, how in _plan(self.__class__)[2])
    finally:
        showing.discard(id(self))
    return f"{self.__class__.__qualname__.rsplit('>.', 1)[-1]}({items})"


def _shared(decorator: Callable[..., Any], *, frozen_by_default: bool) -> Callable[..., Any]:
    def decorate(maybe_cls: type | None = None, **kwargs: Any) -> Any:
        def build(cls: type) -> type:
            own = cls.__dict__
            if _ATTRS_ONLY.intersection(kwargs) or {"__eq__", "__hash__", "__repr__"}.intersection(own):
                return decorator(cls, **kwargs)  # type: ignore[no-any-return]
            built: type = decorator(cls, eq=False, repr=False, **kwargs)
            built.__eq__ = _eq  # type: ignore[assignment,method-assign]
            hashable = kwargs.get("frozen", frozen_by_default)
            built.__hash__ = _hash if hashable else None  # type: ignore[assignment,method-assign]
            built.__repr__ = _repr  # type: ignore[assignment,method-assign]
            return built

        return build if maybe_cls is None else build(maybe_cls)

    return decorate


__all__ = ["define", "frozen"]

if TYPE_CHECKING:
    from attrs import define, frozen
else:
    frozen = _shared(attrs.frozen, frozen_by_default=True)
    define = _shared(attrs.define, frozen_by_default=False)
