"""Strict loading of ``protocol.yml``: YAML → attrs records, refusing anything unexpected.

Two layers of strictness:

* the YAML loader resolves only ``true``/``false`` as booleans (YAML 1.2 core schema), so
  ``no``, ``on`` or ``yes`` stay strings instead of silently becoming booleans;
* the strict converter (``snodo/convert.py``) forbids unknown keys and refuses coercions
  (``"3"`` is not an int, ``3.9`` is not an int, ``"no"`` is not a boolean) and range
  checks numbers.

Before structuring, the composed YAML is walked once: a duplicate key (at any level), too
deep a nesting, too many nodes (an alias bomb) or a recursive alias is refused, and so is a
file larger than :data:`MAX_BYTES`.

Every problem is reported as ``file:line: message @ path.to[0].field``.
"""

from __future__ import annotations

import re
from pathlib import Path

import yaml
from cattrs.errors import ClassValidationError, ForbiddenExtraKeysError, IterableValidationError
from cattrs.v import format_exception, transform_error

from snodo.convert import CONVERTER, did_you_mean
from snodo.errors import ProtocolError
from snodo.protocol.models import Protocol

PROTOCOL_RELPATH = Path(".snodo") / "protocol.yml"

#: A protocol is a page of settings; anything bigger is refused before it is parsed.
MAX_BYTES = 1_000_000
#: Deepest nesting of mappings and lists (the deepest real field is about 6 levels down).
MAX_DEPTH = 40
#: Most nodes the document may expand to, aliases counted each time they are used.
MAX_NODES = 100_000


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
_PATH_TOKEN = re.compile(r"\.([A-Za-z_][A-Za-z0-9_]*)|\[(\d+)\]|\[('[^']*')\]")


def _line_of(root: yaml.Node | None, path: str) -> int | None:
    """Follow ``modes[1].tools[0]`` through the composed YAML nodes to a 1-based line.

    A path ending at a mapping key gives the key's line (``tools:``), not its value's.
    """
    node = root
    line = node.start_mark.line + 1 if node is not None else None
    for m in _PATH_TOKEN.finditer(path):
        if node is None:
            break
        key, index, quoted = m.group(1), m.group(2), m.group(3)
        if quoted is not None:
            key = quoted.strip("'")
        nxt: yaml.Node | None = None
        at: int | None = None
        if key is not None and isinstance(node, yaml.MappingNode):
            for k, v in node.value:
                if getattr(k, "value", None) == key:
                    nxt, at = v, k.start_mark.line + 1
                    break
        elif index is not None and isinstance(node, yaml.SequenceNode):
            i = int(index)
            nxt = node.value[i] if i < len(node.value) else None
        if nxt is None:
            break
        node = nxt
        line = at if at is not None else node.start_mark.line + 1
    return line


class _Refused(Exception):
    """Problems found while walking the composed YAML, before anything is structured."""

    def __init__(self, problems: list[str]) -> None:
        super().__init__(problems)
        self.problems = problems


def _walk(root: yaml.Node, source: str) -> list[tuple[int, str]]:
    """Find duplicate keys; refuse deep nesting, alias bombs and recursive aliases; one walk."""
    problems: list[tuple[int, str]] = []
    seen_dupes: set[tuple[int, int]] = set()
    count = 0
    on_path: set[int] = set()

    def visit(node: yaml.Node, path: str, depth: int) -> None:
        nonlocal count
        count += 1
        line = node.start_mark.line + 1
        if count > MAX_NODES:
            raise _Refused(
                [
                    f"{source}:{line}: the document expands to more than {MAX_NODES} values "
                    "(aliases counted each time they are used); a protocol is never that large"
                ]
            )
        if depth > MAX_DEPTH:
            raise _Refused(
                [f"{source}:{line}: nested more than {MAX_DEPTH} levels deep @ {path.lstrip('.') or '(top level)'}"]
            )
        if id(node) in on_path:
            raise _Refused([f"{source}:{line}: an alias refers to a value that contains it @ {path.lstrip('.')}"])
        if isinstance(node, yaml.MappingNode):
            on_path.add(id(node))
            first: dict[str, int] = {}
            for key, value in node.value:
                name = key.value if isinstance(key, yaml.ScalarNode) else None
                if name is not None and key.tag != "tag:yaml.org,2002:merge":
                    here = key.start_mark.line + 1
                    if name in first and (here, key.start_mark.column) not in seen_dupes:
                        seen_dupes.add((here, key.start_mark.column))
                        at = f"{path}.{name}".lstrip(".")
                        problems.append(
                            (
                                here,
                                f"{source}:{here}: duplicate key {name!r} (first at line {first[name]}); "
                                f"a key may appear only once in a mapping @ {at}",
                            )
                        )
                    first.setdefault(name, here)
                visit(value, f"{path}.{name}" if name is not None else path, depth + 1)
            on_path.discard(id(node))
        elif isinstance(node, yaml.SequenceNode):
            on_path.add(id(node))
            for i, item in enumerate(node.value):
                visit(item, f"{path}[{i}]", depth + 1)
            on_path.discard(id(node))

    visit(root, "", 0)
    return problems


def _compose(text: str, source: str) -> tuple[yaml.Node | None, object, list[tuple[int, str]]]:
    """Compose and construct ``text`` once, refusing anything pathological with a clean message."""
    if len(text) > MAX_BYTES:
        msg = f"{source}: the file is {len(text)} characters long; a protocol may be at most {MAX_BYTES}"
        raise ProtocolError(msg, problems=(msg,), hint="a protocol is a page of settings; is this the right file?")
    loader: _StrictLoader | None = None
    try:
        loader = _StrictLoader(text)
        root = loader.get_single_node()
        if root is None:
            return None, None, []
        duplicates = _walk(root, source)
        return root, loader.construct_document(root), duplicates
    except _Refused as exc:
        raise ProtocolError(
            f"{source}: the protocol was refused ({len(exc.problems)} problem{'s' * (len(exc.problems) != 1)})",
            problems=tuple(exc.problems),
        ) from None
    except RecursionError:
        msg = f"{source}: the document is nested too deeply to read (at most {MAX_DEPTH} levels)"
        raise ProtocolError(msg, problems=(msg,)) from None
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
    finally:
        if loader is not None:
            loader.dispose()


def parse_protocol(text: str, *, source: str = "protocol.yml") -> Protocol:
    """Parse and structure a protocol document; raise ProtocolError listing every problem."""
    root, data, duplicates = _compose(text, source)
    if not isinstance(data, dict):
        got = "an empty document" if data is None else f"a {type(data).__name__}"
        msg = f"{source}:1: the protocol must be a mapping of fields, got {got}"
        raise ProtocolError(msg, problems=(msg,))
    problems: list[tuple[int, str]] = list(duplicates)
    protocol: Protocol | None = None
    try:
        protocol = CONVERTER.structure(data, Protocol)
    except (ClassValidationError, IterableValidationError) as exc:
        for entry in transform_error(exc, path="", format_exception=_describe):
            message, _, path = entry.rpartition(" @ ")
            path = _IDENT_KEY.sub(r".\1", path).lstrip(".") or "(top level)"
            lookup = "" if path == "(top level)" else ("." + path if not path.startswith("[") else path)
            unknown = re.match(r"unknown key '([^']+)'", message)
            if unknown:  # point at the offending key itself, not at its parent mapping
                lookup += "." + unknown.group(1)
            line = _line_of(root, lookup)
            where = f"{source}:{line}" if line else source
            problems.append((line or 0, f"{where}: {message} @ {path}"))
    except (ValueError, TypeError) as exc:
        problems.append((0, f"{source}: {exc}"))
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
            problems=tuple(f"{source}:{_line_of(root, '.' + f)}: at least one entry is required @ {f}" for f in empty),
        )
    return protocol


def read_protocol_file(path: Path) -> Protocol:
    try:
        size = path.stat().st_size
        if size > MAX_BYTES:
            msg = f"{path}: the file is {size} bytes long; a protocol may be at most {MAX_BYTES}"
            raise ProtocolError(msg, problems=(msg,), hint="a protocol is a page of settings; is this the right file?")
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
