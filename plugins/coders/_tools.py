"""The tools a model-driven coder is offered, and how their calls are answered.

``submit_files`` is how the model hands over its work, as structured data the engine can
filter and write. ``read_file`` and ``list_files`` let it look at the project first; they
only read, and only inside the workspace, whatever path the model asks for.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from snodo.api import CoderError, FileOperation

from .._files import inside, read_text, walk

MAX_LISTED = 400
MAX_READ = 60_000

_FILES_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "files": {
            "type": "array",
            "description": "Every change, in order.",
            "items": {
                "type": "object",
                "properties": {
                    "op": {"type": "string", "enum": ["write", "delete"]},
                    "path": {"type": "string", "description": "relative to the project root"},
                    "content": {"type": "string", "description": "the whole new file (write only)"},
                },
                "required": ["op", "path"],
            },
        },
        "summary": {"type": "string", "description": "one line on what you changed"},
    },
    "required": ["files"],
}


def _function(name: str, description: str, parameters: dict[str, Any]) -> dict[str, Any]:
    return {
        "type": "function",
        "function": {"name": name, "description": description, "parameters": parameters},
    }


SUBMIT = _function("submit_files", "Hand in your finished work as whole-file writes and deletes.", _FILES_SCHEMA)
READ_TOOLS = (
    _function(
        "read_file",
        "Read a text file of the project.",
        {"type": "object", "properties": {"path": {"type": "string"}}, "required": ["path"]},
    ),
    _function(
        "list_files",
        "List the project's files under a directory (default: the whole project).",
        {"type": "object", "properties": {"path": {"type": "string"}}},
    ),
)


def parse_operations(data: Any) -> tuple[tuple[FileOperation, ...], str]:
    """Validated operations (and the model's summary) from ``{"files": [...]}``."""
    if not isinstance(data, dict) or not isinstance(data.get("files"), list):
        raise CoderError('the model\'s reply has no "files" list of operations')
    ops: list[FileOperation] = []
    for i, item in enumerate(data["files"]):
        if not isinstance(item, dict):
            raise CoderError(f"files[{i}] is not an object")
        op: Any = item.get("op", "write")
        path: Any = item.get("path")
        content: Any = item.get("content")
        try:
            ops.append(FileOperation(op=op, path=path, content=content))
        except (ValueError, TypeError) as exc:
            raise CoderError(f"files[{i}] is not a valid operation: {exc}") from None
    summary = data.get("summary")
    return tuple(ops), summary if isinstance(summary, str) else ""


def answer(workspace: Path, name: str, arguments: str) -> str:
    """The text result of a read-only tool call; problems are told to the model, not raised."""
    try:
        args = json.loads(arguments or "{}")
    except ValueError:
        return f"error: the arguments of {name} are not valid JSON"
    path = args.get("path") if isinstance(args, dict) else None
    if name == "read_file":
        if not isinstance(path, str) or not path:
            return "error: read_file needs a path"
        text = read_text(workspace, path, MAX_READ)
        return text if text is not None else f"error: {path} is not a readable text file inside the project"
    if name == "list_files":
        return _listing(workspace, path if isinstance(path, str) and path else ".")
    return f"error: there is no tool named {name!r}"


def _listing(workspace: Path, path: str) -> str:
    base = inside(workspace, path)
    if base is None or not base.is_dir():
        return f"error: {path} is not a directory inside the project"
    prefix = base.relative_to(workspace.resolve()).as_posix()
    names = [n if prefix == "." else f"{prefix}/{n}" for n in walk(base)]
    if len(names) > MAX_LISTED:
        names = [*names[:MAX_LISTED], f"... and {len(names) - MAX_LISTED} more"]
    return "\n".join(names) or "(no files)"
