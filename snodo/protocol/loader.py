"""Strict loading of ``protocol.yml``: YAML → attrs records, refusing anything unexpected.

Two layers of strictness:

* the YAML loader resolves only ``true``/``false`` as booleans (YAML 1.2 core schema), so
  ``no``, ``on`` or ``yes`` stay strings instead of silently becoming booleans;
* one private cattrs converter forbids unknown keys and refuses coercions (``"3"`` is not
  an int, ``3.9`` is not an int, ``"no"`` is not a boolean).

Every problem is reported as ``file:line: message @ path.to[0].field``.
"""

from __future__ import annotations

import re
import typing
from collections.abc import Callable
from pathlib import Path
from typing import Any

import cattrs
import yaml
from cattrs.errors import (
    ClassValidationError,
    ForbiddenExtraKeysError,
    IterableValidationError,
    IterableValidationNote,
)
from cattrs.v import format_exception, transform_error

from snodo.errors import ProtocolError
from snodo.protocol.models import Protocol

PROTOCOL_RELPATH = Path(".snodo") / "protocol.yml"


class _StrictLoader(yaml.SafeLoader):
    """SafeLoader whose booleans are only true/false, whatever the case."""


_StrictLoader.yaml_implicit_resolvers = {
    first: [(tag, rx) for tag, rx in resolvers if tag != "tag:yaml.org,2002:bool"]
    for first, resolvers in yaml.SafeLoader.yaml_implicit_resolvers.items()
}
_StrictLoader.add_implicit_resolver(
    "tag:yaml.org,2002:bool",
    re.compile(r"^(?:true|True|TRUE|false|False|FALSE)$"),
    list("tTfF"),
)


def _strict(kind: type, check: Callable[[Any], bool], expected: str) -> Callable[[Any, type], Any]:
    def hook(value: Any, _type: type) -> Any:
        if not check(value):
            raise ValueError(f"expected {expected}, got {type(value).__name__} {value!r}")
        return kind(value)

    return hook


def _make_converter() -> cattrs.Converter:
    conv = cattrs.Converter(forbid_extra_keys=True, detailed_validation=True)
    conv.register_structure_hook(str, _strict(str, lambda v: isinstance(v, str), "a string"))
    conv.register_structure_hook(
        int, _strict(int, lambda v: isinstance(v, int) and not isinstance(v, bool), "an integer")
    )
    conv.register_structure_hook(
        float,
        _strict(float, lambda v: isinstance(v, int | float) and not isinstance(v, bool), "a number"),
    )
    conv.register_structure_hook(bool, _strict(bool, lambda v: isinstance(v, bool), "true or false"))

    def structure_any(value: Any, _type: type) -> Any:
        return value

    conv.register_structure_hook(typing.Any, structure_any)

    def structure_mapping(value: Any, _type: type) -> dict[str, Any]:
        if not isinstance(value, dict):
            raise ValueError(f"expected a mapping, got {type(value).__name__}")
        bad = [k for k in value if not isinstance(k, str)]
        if bad:
            raise ValueError(f"keys must be strings, got {bad[0]!r}")
        return dict(value)

    conv.register_structure_hook_func(
        lambda t: typing.get_origin(t) is dict,  # type: ignore[comparison-overlap]
        structure_mapping,
    )

    def structure_tuple(value: Any, type_: Any) -> tuple[Any, ...]:
        if not isinstance(value, list):
            raise ValueError(f"expected a list, got {type(value).__name__} {value!r}")
        (item_type, _ellipsis) = typing.get_args(type_)
        errors: list[Exception] = []
        out = []
        for i, item in enumerate(value):
            try:
                out.append(conv.structure(item, item_type))
            except Exception as exc:  # collected and re-raised as a group below
                exc.__notes__ = [IterableValidationNote(f"Structuring index {i}", i, item_type)]
                errors.append(exc)
        if errors:
            raise IterableValidationError("list items failed", errors, type_)
        return tuple(out)

    conv.register_structure_hook_func(
        lambda t: (
            typing.get_origin(t) is tuple  # type: ignore[comparison-overlap]
            and typing.get_args(t)[1:] == (Ellipsis,)
        ),
        structure_tuple,
    )
    return conv


_converter = _make_converter()


def _describe(exc: BaseException, type_: type | None) -> str:
    """Keep our own validators' messages instead of cattrs' generic 'invalid value'."""
    if isinstance(exc, ForbiddenExtraKeysError):
        keys = ", ".join(sorted(map(str, exc.extra_fields)))
        allowed = ", ".join(a.name for a in getattr(exc.cl, "__attrs_attrs__", ()))
        return f"unknown key {keys!r} (allowed: {allowed})"
    if isinstance(exc, KeyError):
        return f"required field {exc.args[0]!r} is missing" if exc.args else "required field missing"
    if type_ is not None and typing.get_origin(type_) is typing.Literal:
        return f"expected one of: {', '.join(map(str, typing.get_args(type_)))}"
    if isinstance(exc, ValueError) and exc.args and isinstance(exc.args[0], str):
        return exc.args[0]
    if isinstance(exc, TypeError) and "required positional argument" in str(exc):
        return str(exc).split(")", 1)[-1].strip() or str(exc)
    return format_exception(exc, type_)


_PATH_TOKEN = re.compile(r"\.([A-Za-z_][A-Za-z0-9_]*)|\[(\d+)\]|\[('[^']*')\]")


def _line_of(root: yaml.Node | None, path: str) -> int | None:
    """Follow ``modes[1].tools[0]`` through the composed YAML nodes to a 1-based line."""
    node = root
    line = node.start_mark.line + 1 if node is not None else None
    for m in _PATH_TOKEN.finditer(path):
        if node is None:
            break
        key, index, quoted = m.group(1), m.group(2), m.group(3)
        if quoted is not None:
            key = quoted.strip("'")
        nxt: yaml.Node | None = None
        if key is not None and isinstance(node, yaml.MappingNode):
            for k, v in node.value:
                if getattr(k, "value", None) == key:
                    nxt = v
                    break
        elif index is not None and isinstance(node, yaml.SequenceNode):
            i = int(index)
            nxt = node.value[i] if i < len(node.value) else None
        if nxt is None:
            break
        node = nxt
        line = node.start_mark.line + 1
    return line


def parse_protocol(text: str, *, source: str = "protocol.yml") -> Protocol:
    """Parse and structure a protocol document; raise ProtocolError listing every problem."""
    try:
        root = yaml.compose(text, Loader=_StrictLoader)
        data = yaml.load(text, Loader=_StrictLoader)  # noqa: S506 - strict SafeLoader subclass
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        where = f"{source}:{mark.line + 1}:{mark.column + 1}" if mark else source
        raise ProtocolError(
            f"{where}: YAML syntax error: {exc.problem or exc}",
            problems=(f"{where}: YAML syntax error: {exc.problem or exc}",),
            hint="fix the YAML syntax at that line (indentation, a missing ':' or quote)",
        ) from None
    except yaml.YAMLError as exc:
        raise ProtocolError(f"{source}: YAML error: {exc}", problems=(f"{source}: {exc}",)) from None
    if not isinstance(data, dict):
        got = "an empty document" if data is None else f"a {type(data).__name__}"
        msg = f"{source}:1: the protocol must be a mapping of fields, got {got}"
        raise ProtocolError(msg, problems=(msg,))
    try:
        protocol = _converter.structure(data, Protocol)
    except (ClassValidationError, IterableValidationError) as exc:
        problems = []
        for entry in transform_error(exc, path="", format_exception=_describe):
            message, _, path = entry.rpartition(" @ ")
            path = path.lstrip(".") or "(top level)"
            lookup = "" if path == "(top level)" else ("." + path if not path.startswith("[") else path)
            unknown = re.match(r"unknown key '([^',]+)", message)
            if unknown:  # point at the offending key itself, not at its parent mapping
                lookup += "." + unknown.group(1)
            line = _line_of(root, lookup)
            where = f"{source}:{line}" if line else source
            problems.append(f"{where}: {message} @ {path}")
        raise ProtocolError(
            f"{source}: the protocol was refused ({len(problems)} problem{'s' * (len(problems) != 1)})",
            problems=tuple(problems),
        ) from None
    except (ValueError, TypeError) as exc:
        msg = f"{source}: {exc}"
        raise ProtocolError(msg, problems=(msg,)) from None
    empty = [f for f in ("modes", "validators") if not getattr(protocol, f)]
    if empty:
        raise ProtocolError(
            f"{source}: the protocol was refused",
            problems=tuple(f"{source}:{_line_of(root, '.' + f)}: at least one entry is required @ {f}" for f in empty),
        )
    return protocol


def read_protocol_file(path: Path) -> Protocol:
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise ProtocolError(
            f"{path}: no protocol file here",
            hint="run `snodo init` in the project, or pass --protocol PATH",
        ) from None
    except (OSError, UnicodeDecodeError) as exc:
        raise ProtocolError(f"{path}: cannot read the protocol: {exc}") from None
    return parse_protocol(text, source=str(path))


def find_protocol(start: Path, explicit: Path | None = None) -> Path:
    """The protocol to use: ``explicit`` if given, else the nearest ``.snodo/protocol.yml``."""
    if explicit is not None:
        return explicit
    here = start.resolve()
    for candidate in (here, *here.parents):
        p = candidate / PROTOCOL_RELPATH
        if p.is_file():
            return p
    return here / PROTOCOL_RELPATH


def project_root_for(protocol_path: Path) -> Path:
    """``<project>/.snodo/protocol.yml`` → ``<project>``; elsewhere, the file's directory."""
    p = protocol_path.resolve()
    if p.parent.name == ".snodo":
        return p.parent.parent
    return p.parent
