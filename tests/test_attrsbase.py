"""snodo.attrsbase: attrs classes with shared eq/hash/repr behave as attrs' generated ones."""

from __future__ import annotations

import pickle

import attrs
import pytest
from attrs import evolve, field

from snodo.attrsbase import define, frozen


def _pair(name, **kwargs):
    """The same class body built by attrs and by snodo.attrsbase."""

    def body():
        class Record:
            name: str
            count: int = 0
            secret: str = field(default="s", repr=False)
            note: str = field(default="n", eq=False)
            shown: str = field(default="x", repr=lambda v: f"<{v}>")
            folded: str = field(default="A", eq=str.lower)

        return Record

    plain = getattr(attrs, name)(**kwargs)(body())
    shared = {"frozen": frozen, "define": define}[name](**kwargs)(body())
    return plain, shared


@pytest.mark.parametrize("decorator", ["frozen", "define"])
def test_equality_hash_and_repr_are_attrs_own(decorator):
    plain, shared = _pair(decorator, kw_only=True)
    for make in (plain, shared):
        a = make(name="a", count=1, note="one", folded="ABC")
        b = make(name="a", count=1, note="two", folded="abc")  # differs only where eq ignores
        c = make(name="a", count=2)
        assert (a == b, a != b) == (True, False)  # __ne__ is the inverse of the shared __eq__
        assert (a == c, a != c) == (False, True)
        assert (a == "a") is False and a != "a"
    assert repr(plain(name="a", count=1)) == repr(shared(name="a", count=1))
    assert repr(shared(name="a")) == "Record(name='a', count=0, note='n', shown=<x>, folded='A')"
    # instances of two different classes never compare equal, whatever their fields
    assert shared(name="a") != plain(name="a")
    if decorator == "frozen":
        assert hash(shared(name="a", note="x", folded="Q")) == hash(shared(name="a", note="y", folded="q"))
        assert len({shared(name="a"), shared(name="a"), shared(name="b")}) == 2
    else:
        with pytest.raises(TypeError):
            hash(shared(name="a"))
        with pytest.raises(TypeError):
            hash(plain(name="a"))


@frozen(kw_only=True)
class Point:
    x: int
    y: int = field(default=0, converter=int)

    @y.validator
    def _check(self, _attribute, value):
        if value < 0:
            raise ValueError("negative")


def test_what_attrs_keeps_doing():
    p = Point(x=1, y="2")
    assert p.y == 2 and evolve(p, x=5) == Point(x=5, y=2)
    with pytest.raises(ValueError, match="negative"):
        Point(x=1, y=-1)
    with pytest.raises(attrs.exceptions.FrozenInstanceError):
        p.x = 3  # type: ignore[misc]
    assert pickle.loads(pickle.dumps(p)) == p
    assert attrs.asdict(p) == {"x": 1, "y": 2}
    assert not hasattr(p, "__dict__")  # slotted, as attrs makes it


def test_a_class_with_its_own_methods_or_attrs_only_options_is_left_to_attrs():
    @frozen
    class Own:
        value: int

        def __repr__(self) -> str:
            return "mine"

    @frozen(order=True)
    class Ordered:
        value: int

    assert repr(Own(1)) == "mine" and Own(1) == Own(1)
    assert Ordered(1) < Ordered(2)


def test_subclasses_and_cycles():
    @define
    class Node:
        label: str
        nxt: object = None

    @define
    class Leaf(Node):
        extra: int = 0

    n = Node("a")
    n.nxt = n
    assert repr(n) == "Node(label='a', nxt=...)"
    assert Leaf("a", None, 1) == Leaf("a", None, 1) and Leaf("a") != Node("a")
    assert repr(Leaf("b", None, 2)) == "Leaf(label='b', nxt=None, extra=2)"
