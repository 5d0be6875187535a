"""Identifier case conversions."""

import re

_PARTS = re.compile(r"[A-Z]+(?=[A-Z][a-z]|\d|\b|_)|[A-Z]?[a-z]+|[A-Z]+|\d+")


def parts(name: str) -> list[str]:
    return [p.lower() for p in _PARTS.findall(name)]


def snake_case(name: str) -> str:
    return "_".join(parts(name))


def kebab_case(name: str) -> str:
    return "-".join(parts(name))


def camel_case(name: str) -> str:
    first, *rest = parts(name) or [""]
    return first + "".join(p.capitalize() for p in rest)
