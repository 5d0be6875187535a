"""Strict loading of ``protocol.yml``: YAML → the strict converter → attrs records; every
problem reads ``file:line: message @ path.to[0].field``."""

from __future__ import annotations

import re
from pathlib import Path
from typing import TYPE_CHECKING, Any

from cattrs.errors import ClassValidationError, ForbiddenExtraKeysError, IterableValidationError
from cattrs.v import format_exception, transform_error

from snodo.base.convert import CONVERTER, did_you_mean
from snodo.base.errors import ProtocolError
from snodo.protocol.models import Protocol

if TYPE_CHECKING:
    from snodo.git.runner import GitObject

#: The list of who may sign a change to ``.snodo/``, beside the protocol file.
SIGNERS_NAME = "allowed_signers"

PROTOCOL_RELPATH = Path(".snodo") / "protocol.yml"

#: A protocol is a page of settings; anything bigger is refused unparsed.
MAX_BYTES = 1_000_000


def _describe(exc: BaseException, type_: type | None) -> str:
    """Keep our own validators' messages instead of cattrs' generic 'invalid value'."""
    if isinstance(exc, ForbiddenExtraKeysError):
        names = [a.name for a in getattr(exc.cl, "__attrs_attrs__", ())]
        unknown = "; ".join(f"unknown key {k!r}{did_you_mean(k, names)}" for k in sorted(map(str, exc.extra_fields)))
        return f"{unknown}; allowed: {', '.join(names)}"
    if isinstance(exc, KeyError):
        return f"required field {exc.args[0]!r} is missing" if exc.args else "required field missing"
    if isinstance(exc, ValueError) and exc.args and isinstance(exc.args[0], str):
        return exc.args[0]
    if isinstance(exc, TypeError) and "required positional argument" in str(exc):
        return str(exc).split(")", 1)[-1].strip() or str(exc)
    return format_exception(exc, type_)


_IDENT_KEY = re.compile(r"\['([A-Za-z_][A-Za-z0-9_]*)'\]")


def parse_protocol(text: str, *, source: str = "protocol.yml") -> Protocol:
    """Parse and structure a protocol document; raise ProtocolError listing every problem."""
    return parse_composed(text, source)[0]


def parse_composed(text: str, source: str) -> tuple[Protocol, Any]:
    """:func:`parse_protocol`, and the composed YAML that locates a field by its path."""
    from snodo.protocol.yamldoc import compose, line_of  # noqa: PLC0415 PyYAML loads only when a protocol is parsed

    root, data, duplicates = compose(text, source, MAX_BYTES)
    if not isinstance(data, dict):
        got = "an empty document" if data is None else f"a {type(data).__name__}"
        msg = f"{source}:1: the protocol must be a mapping of fields, got {got}"
        raise ProtocolError(msg, problems=(msg,))
    protocol, problems = _structure(data, root, source)
    problems = [*duplicates, *problems]
    if problems or protocol is None:
        ordered = tuple(text for _line, text in sorted(problems, key=lambda p: p[0]))
        raise ProtocolError(
            f"{source}: the protocol was refused ({len(ordered)} problem{'s' * (len(ordered) != 1)})",
            problems=ordered,
        )
    empty = [f for f in ("modes", "validators") if not getattr(protocol, f)]
    if empty:
        raise ProtocolError(
            f"{source}: the protocol was refused",
            problems=tuple(f"{source}:{line_of(root, '.' + f)}: at least one entry is required @ {f}" for f in empty),
        )
    return protocol, root


def _structure(data: dict[str, Any], root: Any, source: str) -> tuple[Protocol | None, list[tuple[int, str]]]:
    try:
        return CONVERTER.structure(data, Protocol), []
    except (ClassValidationError, IterableValidationError) as exc:
        return None, [
            _locate(entry, root, source) for entry in transform_error(exc, path="", format_exception=_describe)
        ]
    except (ValueError, TypeError) as exc:
        return None, [(0, f"{source}: {exc}")]


def _locate(entry: str, root: Any, source: str) -> tuple[int, str]:
    """A cattrs problem (``message @ $.modes[0]['tools']``) as ``(line, file:line: message @ modes[0].tools)``."""
    from snodo.protocol.yamldoc import line_of  # noqa: PLC0415 PyYAML loads only when a protocol is parsed

    message, _, path = entry.rpartition(" @ ")
    path = _IDENT_KEY.sub(r".\1", path).lstrip(".") or "(top level)"
    lookup = "" if path == "(top level)" else ("." + path if not path.startswith("[") else path)
    unknown = re.match(r"unknown key '([^']+)'", message)
    if unknown:  # point at the offending key itself, not at its parent mapping
        lookup += "." + unknown.group(1)
    line = line_of(root, lookup)
    return line or 0, f"{source}:{line}: {message} @ {path}" if line else f"{source}: {message} @ {path}"


def read_protocol_text(path: Path) -> str | None:
    """The text of the protocol file at ``path`` (``None``: there is none), refused unread when oversized."""
    try:
        size = path.stat().st_size
        if size > MAX_BYTES:
            msg = f"{path}: the file is {size} bytes long; a protocol may be at most {MAX_BYTES}"
            raise ProtocolError(msg, problems=(msg,), hint="a protocol is a page of settings; is this the right file?")
        return path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return None
    except (OSError, UnicodeDecodeError) as exc:
        raise ProtocolError(f"{path}: cannot read the protocol: {exc}") from None


def no_protocol(path: Path) -> ProtocolError:
    return ProtocolError(
        f"{path}: no protocol file here", hint="run `snodo init` in the project, or pass --protocol PATH"
    )


def read_protocol_file(path: Path) -> Protocol:
    return read_composed(path)[0]


def read_composed(path: Path, text: str | None = None) -> tuple[Protocol, Any]:
    """The protocol at ``path`` (``text``: its content) and its composed YAML (:func:`parse_composed`)."""
    if text is None and (text := read_protocol_text(path)) is None:
        raise no_protocol(path)
    return parse_composed(text, str(path))


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
    return p.parent.parent if p.parent.name == ".snodo" else p.parent


def blob_text(obj: GitObject | None) -> str | None:
    """A git blob's text (undecodable bytes replaced); ``None`` for anything but a blob."""
    return obj.data.decode("utf-8", "replace") if obj is not None and obj.kind == "blob" else None
