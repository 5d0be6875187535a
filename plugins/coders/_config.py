"""Strict reading of a mode's ``coder_config``.

The mapping comes from the protocol file, so a typo (``modle:``) must be refused by name
rather than silently ignored: a coder quietly running without the setting the author
meant is worse than a run that stops and says why.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from snodo.api import CoderError


class CoderConfig:
    """Typed accessors over one coder's ``coder_config``; construction rejects unknown keys."""

    def __init__(self, coder: str, config: Mapping[str, Any], allowed: tuple[str, ...]) -> None:
        if not isinstance(config, Mapping):
            raise CoderError(f"coder {coder!r}: coder_config must be a mapping, got {type(config).__name__}")
        unknown = sorted(str(k) for k in config if k not in allowed)
        if unknown:
            raise CoderError(
                f"coder {coder!r}: unknown coder_config key(s): {', '.join(unknown)}",
                hint=f"the {coder} coder honours: {', '.join(allowed)}",
            )
        self.coder = coder
        self.raw = config

    def _bad(self, key: str, expected: str) -> CoderError:
        return CoderError(f"coder {self.coder!r}: coder_config.{key} must be {expected}, got {self.raw[key]!r}")

    def text(self, key: str) -> str | None:
        value = self.raw.get(key)
        if value is None:
            return None
        if not isinstance(value, str) or not value.strip():
            raise self._bad(key, "a non-empty string")
        return value

    def number(self, key: str, *, positive: bool = True) -> float | None:
        value = self.raw.get(key)
        if value is None:
            return None
        if isinstance(value, bool) or not isinstance(value, int | float) or (positive and value <= 0):
            raise self._bad(key, "a positive number" if positive else "a number")
        return float(value)

    def integer(self, key: str) -> int | None:
        value = self.raw.get(key)
        if value is None:
            return None
        if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
            raise self._bad(key, "a positive integer")
        return value

    def strings(self, key: str) -> tuple[str, ...]:
        value = self.raw.get(key)
        if value is None:
            return ()
        if not isinstance(value, list | tuple) or not all(isinstance(v, str) for v in value):
            raise self._bad(key, "a list of strings")
        return tuple(value)
