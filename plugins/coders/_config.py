"""Strict reading of a mode's ``coder_config``, by the core's one settings rule.

The mapping comes from the protocol file, so a typo (``modle:``) or a value of the wrong
type must be refused by name rather than silently ignored: a coder quietly running without
the setting the author meant is worse than a run that stops and says why. Construction runs
:func:`snodo.api.check_settings` on the declared settings, the check ``snodo protocol check``
and the engine run, so all three say the same thing.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, cast

from snodo.api import CoderError, Setting


class CoderConfig:
    """Typed accessors over one coder's ``coder_config``; construction refuses unknown keys and
    values whose type the coder declared otherwise."""

    def __init__(self, coder: str, config: Mapping[str, Any], allowed: Sequence[str]) -> None:
        problems = Setting.coder_config_problems(coder, allowed, config)
        if problems:
            raise CoderError("; ".join(message for _key, message in problems))
        self.coder = coder
        self.raw: Mapping[str, Any] = Setting.with_defaults(allowed, config)

    def _typed(self, key: str, kind: str) -> Any:
        """The value of ``key`` (``None`` when unset), by the same type rule as declarations."""
        value = self.raw.get(key)
        if value is not None and (problem := Setting(key, kind).problem(value)) is not None:
            raise CoderError(f"coder {self.coder!r}: coder_config.{key}: {problem}")
        return value

    def text(self, key: str) -> str | None:
        return cast("str | None", self._typed(key, "text"))

    def number(self, key: str, *, positive: bool = True) -> float | None:
        value = self._typed(key, "positive" if positive else "number")
        return None if value is None else float(value)

    def integer(self, key: str) -> int | None:
        return cast("int | None", self._typed(key, "integer"))

    def strings(self, key: str) -> tuple[str, ...]:
        return tuple(self._typed(key, "strings") or ())
