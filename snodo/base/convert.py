"""The one strict cattrs converter, for the protocol file and every state record.

cattrs on its own coerces (``"3"`` becomes 3, ``"no"`` True); files a person or an agent
could have edited must never be read that way. This one forbids undeclared keys, accepts
only the declared type (an int for a float, never a bool for a number), tuples only from
lists, mappings only with string keys, and applies ``Annotated`` metadata with a
``problem(value)`` or ``key_problems(mapping)`` method.
"""

from __future__ import annotations

import typing
from collections.abc import Callable, Iterable
from typing import Any

import cattrs
from cattrs.cols import homogenous_tuple_structure_factory
from cattrs.errors import IterableValidationError, IterableValidationNote


def did_you_mean(word: str, choices: Iterable[str]) -> str:
    """`` (did you mean 'x'?)`` when a choice is plausibly meant (same letters in another case, or
    close), else the empty string."""
    options = sorted({str(c) for c in choices})
    lowered = {c.lower(): c for c in options}
    if word.lower() in lowered and lowered[word.lower()] != word:
        return f" (did you mean {lowered[word.lower()]!r}?)"
    import difflib  # noqa: PLC0415 only when a word is wrong: not on every start

    found = difflib.get_close_matches(word, options, n=1, cutoff=0.6)
    return f" (did you mean {found[0]!r}?)" if found else ""


def _strict(kind: type, check: Callable[[Any], bool], expected: str) -> Callable[[Any, type], Any]:
    def hook(value: Any, _type: type) -> Any:
        if not check(value):
            raise ValueError(f"expected {expected}, got {type(value).__name__} {value!r}")
        return kind(value)

    return hook


def _make() -> cattrs.Converter:
    conv = cattrs.Converter(forbid_extra_keys=True, detailed_validation=True)
    for kind, check, expected in (
        (str, lambda v: isinstance(v, str), "a string"),
        (int, lambda v: isinstance(v, int) and not isinstance(v, bool), "an integer"),
        (float, lambda v: isinstance(v, int | float) and not isinstance(v, bool), "a number"),
        (bool, lambda v: isinstance(v, bool), "true or false"),
    ):
        conv.register_structure_hook(kind, _strict(kind, check, expected))

    conv.register_structure_hook(typing.Any, lambda value, _type: value)

    def structure_literal(value: Any, type_: Any) -> Any:
        allowed = typing.get_args(type_)
        if value in allowed and type(value) in {type(a) for a in allowed}:
            return value
        hint = did_you_mean(value, map(str, allowed)) if isinstance(value, str) else ""
        raise ValueError(f"expected one of: {', '.join(map(str, allowed))}; got {value!r}{hint}")

    def structure_mapping(value: Any, type_: Any) -> dict[Any, Any]:
        if not isinstance(value, dict):
            raise ValueError(f"expected a mapping, got {type(value).__name__} {value!r}")
        bad = [k for k in value if not isinstance(k, str)]
        if bad:
            raise ValueError(f"keys must be strings, got {bad[0]!r}")
        args = typing.get_args(type_)
        return {k: conv.structure(v, args[1] if len(args) == 2 else Any) for k, v in value.items()}

    def structure_annotated(value: Any, type_: Any) -> Any:
        base, *metadata = typing.get_args(type_)
        out = conv.structure(value, base)
        for meta in metadata:
            key_problems = getattr(meta, "key_problems", None)
            if key_problems is not None:
                errors: list[Exception] = []
                for key, message in key_problems(out):
                    error = ValueError(message)
                    error.__notes__ = [IterableValidationNote(f"Structuring mapping value @ key {key!r}", key, Any)]
                    errors.append(error)
                if errors:
                    raise IterableValidationError("mapping values failed", errors, base)
            problem = getattr(meta, "problem", None)
            if problem is not None and (message := problem(out)) is not None:
                raise ValueError(message)
        return out

    by_origin: dict[Any, Callable[[Any, Any], Any]] = {
        typing.Literal: structure_literal,
        typing.Annotated: structure_annotated,
        dict: structure_mapping,
    }
    conv.register_structure_hook_func(
        lambda t: typing.get_origin(t) in by_origin, lambda value, t: by_origin[typing.get_origin(t)](value, t)
    )

    def tuple_factory(type_: Any) -> Callable[[Any, Any], Any]:
        items = homogenous_tuple_structure_factory(type_, conv)

        def structure_tuple(value: Any, t: Any) -> Any:
            if not isinstance(value, list | tuple):
                raise ValueError(f"expected a list, got {type(value).__name__} {value!r}")
            return items(value, t)

        return structure_tuple

    conv.register_structure_hook_factory(
        lambda t: typing.get_origin(t) is tuple and typing.get_args(t)[1:] == (Ellipsis,),  # type: ignore[comparison-overlap]
        tuple_factory,
    )
    return conv


#: The strict converter; structure with it, never with a converter of your own.
CONVERTER = _make()
