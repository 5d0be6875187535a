"""Plugin settings as a plugin declares them (names or :class:`Setting` records), and the one
rule that checks them (:func:`check_settings`), in the same words for the loader, the plugin,
the runner and the conformance kit."""

from __future__ import annotations

import functools
import math
import shlex
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from snodo.base.convert import did_you_mean
from snodo.base.frozen import freeze


def _number(v: Any) -> bool:
    return not isinstance(v, bool) and isinstance(v, int | float) and math.isfinite(v)


#: Shell syntax a command run without a shell would pass to the program literally.
SHELL_TOKENS = frozenset({"&&", "||", "|", ";", ">", ">>", "<", "&", "2>&1", "|&"})
_COMMAND = "a command: a string or a list of strings, run without a shell"


def _strings(v: Any) -> bool:
    return isinstance(v, list | tuple) and all(isinstance(s, str) for s in v)


def split_command(value: Any) -> list[str]:
    """The argv of a ``command`` (a string split like a shell would, or a list of strings), else :class:`ValueError`."""
    if isinstance(value, str):
        try:
            argv = shlex.split(value)
        except ValueError as exc:
            raise ValueError(f"{value!r} cannot be parsed: {exc}") from None
    elif _strings(value):
        argv = list(value)
    else:
        raise ValueError(f"expected {_COMMAND}, got {type(value).__name__} {value!r}")
    shell = [a for a in argv if a in SHELL_TOKENS or "$(" in a or "`" in a]
    if shell:
        raise ValueError(
            f"{value!r} is run without a shell, so {', '.join(shell)} would be passed literally; "
            "put the pipeline in a script and make the command run the script"
        )
    if not argv:
        raise ValueError("the command is empty")
    return argv


def _command_problem(value: Any) -> str | None:
    try:
        split_command(value)
    except ValueError as exc:
        return str(exc)
    return None


#: Each kind: the test a value must pass, and how the message names what was expected.
KINDS: dict[str, tuple[Callable[[Any], bool], str]] = {
    "any": (lambda _v: True, "anything"),
    "text": (lambda v: isinstance(v, str) and bool(v.strip()), "a non-empty string"),
    "number": (_number, "a number"),
    "positive": (lambda v: _number(v) and v > 0, "a positive number"),
    "seconds": (lambda v: _number(v) and v > 0, "a positive number of seconds"),
    "integer": (lambda v: isinstance(v, int) and not isinstance(v, bool) and v > 0, "a positive integer"),
    "count": (lambda v: isinstance(v, int) and not isinstance(v, bool) and v >= 0, "a whole number >= 0"),
    "boolean": (lambda v: isinstance(v, bool), "true or false"),
    "strings": (_strings, "a list of strings"),
    "paths": (lambda v: (isinstance(v, str) and bool(v.strip())) or _strings(v), "a path or a list of paths"),
    "command": (lambda v: _command_problem(v) is None, _COMMAND),
    "mapping": (lambda v: isinstance(v, Mapping), "a mapping"),
}


def as_setting(declared: str) -> Setting:
    return declared if isinstance(declared, Setting) else Setting(str(declared))


def check_settings(
    declared: Iterable[str], values: object, *, owner: str, field: str, reader: str
) -> list[tuple[str | None, str]]:
    """Every problem with ``values`` against ``declared``, as ``(key, message)`` (``key``: ``None``
    when ``values`` is no mapping)."""
    if not isinstance(values, Mapping):
        return [(None, f"{owner}: {field} must be a mapping, got {type(values).__name__}")]
    by_name = {str(s): as_setting(s) for s in declared}
    honoured = ", ".join(by_name) or "no settings"
    out: list[tuple[str | None, str]] = []
    for key, value in values.items():
        setting = by_name.get(str(key))
        if setting is None:
            unknown = f"unknown {field} key {str(key)!r}{did_you_mean(str(key), by_name)}"
            out.append((str(key), f"{owner}: {unknown}; {reader} honours: {honoured}"))
        elif (problem := setting.problem(value)) is not None:
            out.append((str(key), f"{owner}: {field}.{key}: {problem}"))
    return out


def with_defaults(declared: Iterable[str], values: Mapping[str, Any]) -> dict[str, Any]:
    """``values`` (read-only) with each declared default filled in where the protocol left the key out."""
    filled = {str(s): s.default for s in map(as_setting, declared) if s.default is not None}
    frozen: dict[str, Any] = freeze({**filled, **values})
    return frozen


def tooling_problems(
    validator_id: str, validator_type: str, declared: Iterable[str], tooling: object
) -> list[tuple[str | None, str]]:
    """:func:`check_settings` for a validator's ``tooling``: its type's settings and the runner's."""
    return check_settings(
        (*declared, *RUNNER_SETTINGS),
        tooling,
        owner=f"validator {validator_id!r} (type {validator_type})",
        field="tooling",
        reader=f"the {validator_type} validator",
    )


def coder_config_problems(coder: str, declared: Iterable[str], config: object) -> list[tuple[str | None, str]]:
    """:func:`check_settings` for a coder's ``coder_config``."""
    return check_settings(declared, config, owner=f"coder {coder!r}", field="coder_config", reader=f"the {coder} coder")


class Setting(str):
    """A declared setting: its name (it *is* that string, so names and JSON keep working), ``kind`` and ``default``."""

    kind: str
    default: Any
    help: str

    with_defaults = staticmethod(with_defaults)
    tooling_problems = staticmethod(tooling_problems)
    coder_config_problems = staticmethod(coder_config_problems)

    def __new__(cls, name: str, kind: str = "any", *, default: Any = None, help: str = "") -> Setting:
        if kind not in KINDS:
            raise ValueError(f"setting {name!r}: kind must be one of {', '.join(KINDS)}, got {kind!r}")
        self = super().__new__(cls, name)
        object.__setattr__(self, "kind", kind)
        object.__setattr__(self, "default", default)
        object.__setattr__(self, "help", help)
        return self

    def __setattr__(self, _name: str, _value: object) -> None:
        raise TypeError("a Setting is read-only")

    def __repr__(self) -> str:
        return f"Setting({str(self)!r}, {self.kind!r})"

    def __reduce__(self) -> tuple[Any, ...]:
        return (functools.partial(Setting, default=self.default, help=self.help), (str(self), self.kind))

    @property
    def expected(self) -> str:
        return KINDS[self.kind][1]

    def problem(self, value: Any) -> str | None:
        """``expected <what>, got <type> <value>`` (the loader's wording), or ``None`` when it fits."""
        if value is None or KINDS[self.kind][0](value):
            return None
        if self.kind == "command":
            return _command_problem(value)
        return f"expected {self.expected}, got {type(value).__name__} {value!r}"


#: The keys the shared validator runner reads itself, honoured by every validator type.
RUNNER_SETTINGS: tuple[Setting, ...] = (Setting("timeout", "seconds", default=300.0),)
