"""The YAML side of loading a protocol: only ``true``/``false`` are booleans (``no``, ``on``,
``yes`` stay strings); duplicate keys, deep nesting, alias bombs and oversized files are
refused. PyYAML's pure Python parser: libyaml words syntax errors differently."""

from __future__ import annotations

import re

import yaml

from snodo.base.errors import ProtocolError

#: Deepest nesting of mappings and lists (the deepest real field is about 6 levels down).
MAX_DEPTH = 40
#: Most nodes the document may expand to, aliases counted each time they are used.
MAX_NODES = 100_000


class _StrictLoader(yaml.SafeLoader):
    pass


_StrictLoader.yaml_implicit_resolvers = {
    first: [(tag, rx) for tag, rx in resolvers if tag != "tag:yaml.org,2002:bool"]
    for first, resolvers in yaml.SafeLoader.yaml_implicit_resolvers.items()
}
_StrictLoader.add_implicit_resolver(
    "tag:yaml.org,2002:bool",
    re.compile(r"^(?:true|True|TRUE|false|False|FALSE)$"),
    list("tTfF"),
)


_PATH_TOKEN = re.compile(r"\.([A-Za-z_][A-Za-z0-9_]*)|\[(\d+)\]|\[('[^']*')\]")


def line_of(root: yaml.Node | None, path: str) -> int | None:
    """The line of ``modes[1].tools[0]`` in the composed YAML; of the key when the path ends at one."""
    node = root
    line = node.start_mark.line + 1 if node is not None else None
    for m in _PATH_TOKEN.finditer(path):
        key, index, quoted = m.group(1), m.group(2), m.group(3)
        found = _child(node, key if quoted is None else quoted.strip("'"), index)
        if found is None:
            break
        node, line = found
    return line


def _child(node: yaml.Node | None, key: str | None, index: str | None) -> tuple[yaml.Node, int] | None:
    """The value under ``key`` (with its key's line) or at ``index`` (with its own line)."""
    if key is not None and isinstance(node, yaml.MappingNode):
        return next(((v, k.start_mark.line + 1) for k, v in node.value if getattr(k, "value", None) == key), None)
    if index is not None and isinstance(node, yaml.SequenceNode) and int(index) < len(node.value):
        value = node.value[int(index)]
        return value, value.start_mark.line + 1
    return None


def _walk(root: yaml.Node, source: str) -> list[tuple[int, str]]:
    """Find duplicate keys; refuse deep nesting, alias bombs and recursive aliases; one walk."""
    problems: list[tuple[int, str]] = []
    seen_dupes: set[tuple[int, int]] = set()  # a mapping behind an alias is walked once per use
    count = 0
    on_path: set[int] = set()

    def visit(node: yaml.Node, path: str, depth: int) -> None:
        nonlocal count
        count += 1
        at = f"{source}:{node.start_mark.line + 1}"
        if count > MAX_NODES:
            raise _refused(
                source,
                f"{at}: the document expands to more than {MAX_NODES} values "
                "(aliases counted each time they are used); a protocol is never that large",
            )
        if depth > MAX_DEPTH:
            raise _refused(
                source, f"{at}: nested more than {MAX_DEPTH} levels deep @ {path.lstrip('.') or '(top level)'}"
            )
        if id(node) in on_path:
            raise _refused(source, f"{at}: an alias refers to a value that contains it @ {path.lstrip('.')}")
        on_path.add(id(node))
        seq = isinstance(node, yaml.SequenceNode)
        children = [(item, f"{path}[{i}]") for i, item in enumerate(node.value)] if seq else []
        first: dict[str, int] = {}
        for key, value in node.value if isinstance(node, yaml.MappingNode) else ():
            name = key.value if isinstance(key, yaml.ScalarNode) else None
            here, where = key.start_mark.line + 1, (key.start_mark.line + 1, key.start_mark.column)
            if name is not None and key.tag != "tag:yaml.org,2002:merge":
                if name in first and where not in seen_dupes:
                    seen_dupes.add(where)
                    at = f"{path}.{name}".lstrip(".")
                    message = f"duplicate key {name!r} (first at line {first[name]}); a key may appear only once"
                    problems.append((here, f"{source}:{here}: {message} in a mapping @ {at}"))
                first.setdefault(name, here)
            children.append((value, f"{path}.{name}" if name is not None else path))
        for child, child_path in children:  # this mapping's duplicates first, then what is below it
            visit(child, child_path, depth + 1)
        on_path.discard(id(node))

    visit(root, "", 0)
    return problems


def compose(text: str, source: str, max_bytes: int) -> tuple[yaml.Node | None, object, list[tuple[int, str]]]:
    """Compose and construct ``text`` once, refusing anything pathological with a clean message."""
    if len(text) > max_bytes:
        msg = f"{source}: the file is {len(text)} characters long; a protocol may be at most {max_bytes}"
        raise ProtocolError(msg, problems=(msg,), hint="a protocol is a page of settings; is this the right file?")
    loader: _StrictLoader | None = None
    try:
        loader = _StrictLoader(text)
        root = loader.get_single_node()
        if root is None:
            return None, None, []
        duplicates = _walk(root, source)
        return root, loader.construct_document(root), duplicates
    except (RecursionError, yaml.YAMLError) as exc:
        raise _refusal(exc, source) from None
    finally:
        if loader is not None:
            loader.dispose()


def _refused(source: str, problem: str) -> ProtocolError:
    return ProtocolError(f"{source}: the protocol was refused (1 problem)", problems=(problem,))


def _refusal(exc: Exception, source: str) -> ProtocolError:
    if isinstance(exc, RecursionError):
        msg = f"{source}: the document is nested too deeply to read (at most {MAX_DEPTH} levels)"
        return ProtocolError(msg, problems=(msg,))
    if isinstance(exc, yaml.MarkedYAMLError):
        mark = exc.problem_mark or exc.context_mark
        where = f"{source}:{mark.line + 1}:{mark.column + 1}" if mark else source
        msg = f"{where}: YAML syntax error: {exc.problem or exc}"
        return ProtocolError(
            msg,
            problems=(msg,),
            hint="fix the YAML syntax at that line (indentation, a missing ':' or quote)",
        )
    return ProtocolError(f"{source}: YAML error: {exc}", problems=(f"{source}: {exc}",))
