"""Checks every tool call passes before its handler runs (schema fit, size, path shape, a
non-empty spec), the one shape a job is reported in, and the reply a call answers.
"""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Callable, Mapping
from typing import Any

from attrs import frozen

from snodo.base.errors import PathValidationError, ToolError
from snodo.mcp.catalog import TOOLS
from snodo.state.atomic import canonical_json

#: Each argument kind: how a message names it, and whether a value fits it.
_KINDS: dict[str, tuple[str, Callable[[Any], bool]]] = {
    "string": ("a string", lambda v: isinstance(v, str)),
    "boolean": ("true or false", lambda v: type(v) is bool),
    "string_list": (
        "a non-empty list of strings",
        lambda v: isinstance(v, list) and bool(v) and all(isinstance(x, str) for x in v),
    ),
}


@frozen(kw_only=True)
class ToolReply:
    """What a tool call answered: ``data`` on success, or an error ``message`` saying why."""

    ok: bool
    data: dict[str, Any] | None = None
    message: str = ""

    @classmethod
    def error(cls, message: str) -> ToolReply:
        return cls(ok=False, message=message)

    def text(self) -> str:
        if not self.ok:
            return self.message
        return json.dumps(self.data, indent=2, ensure_ascii=False, default=str)


def arguments_sha256(arguments: Mapping[str, Any]) -> str:
    """SHA-256 of the canonical JSON of the arguments: proves what was asked, reveals nothing."""
    try:
        data = canonical_json(dict(arguments))
    except (TypeError, ValueError):
        data = json.dumps(dict(arguments), sort_keys=True, default=repr).encode("utf-8")
    return hashlib.sha256(data).hexdigest()


def check_arguments(name: str, arguments: Mapping[str, Any]) -> str | None:
    """Why the arguments do not fit the tool ``name``, or None: too large (checked before anything
    reads them), or not its schema. Unknown names are refused: a misspelt optional argument must
    not be silently ignored."""
    if too_large := _too_large(arguments):
        return too_large
    params = TOOLS[name].params
    allowed = {p.name: p for p in params}
    unknown = sorted(set(arguments) - set(allowed))
    if unknown:
        takes = ", ".join(allowed) or "no arguments"
        return f"unexpected argument(s) {', '.join(map(repr, unknown))}; {name} takes: {takes}"
    for p in params:
        value = arguments.get(p.name)
        if value is None and p.required:
            return f"missing required argument {p.name!r}"
        what, fits = _KINDS[p.kind]
        if value is not None and not fits(value):
            return f"argument {p.name!r} must be {what}, got {type(value).__name__}"
    return None


MAX_ARGUMENT_BYTES = 4 * 1024 * 1024
"""Default size limit of one call's arguments (UTF-8 bytes); ``SNODO_MAX_ARGUMENT_BYTES`` changes it."""
MAX_PATH_BYTES = 4096
MAX_PATH_COMPONENT_BYTES = 255
_PATH_PARAMS = frozenset({"path", "paths"})


def _too_large(arguments: Mapping[str, Any]) -> str | None:
    raw = os.environ.get("SNODO_MAX_ARGUMENT_BYTES", "").strip()
    limit = int(raw) if raw.isdigit() and int(raw) > 0 else MAX_ARGUMENT_BYTES
    total = 0
    for name, value in arguments.items():
        for item in value if isinstance(value, list) else [value]:
            if isinstance(item, str):
                total += len(item.encode("utf-8", "surrogatepass"))
        if total > limit:
            return (
                f"the arguments are larger than the limit of {limit:,} bytes (at {name!r}); "
                "split the work into smaller calls, or raise SNODO_MAX_ARGUMENT_BYTES "
                "(see docs/architecture.md, bounded inputs)"
            )
    return None


def path_problem(path: str) -> str | None:
    """Why ``path`` cannot name a file at all (refused before the file system sees it)."""
    if "\0" in path:
        return "the path contains a NUL character"
    try:
        encoded = path.encode("utf-8")
    except UnicodeEncodeError:
        return "the path is not valid Unicode text (it holds an unpaired surrogate)"
    if len(encoded) > MAX_PATH_BYTES:
        return f"the path is {len(encoded):,} bytes long; paths are limited to {MAX_PATH_BYTES} bytes"
    if any(len(part.encode("utf-8")) > MAX_PATH_COMPONENT_BYTES for part in path.split("/")):
        return f"a component of the path is longer than {MAX_PATH_COMPONENT_BYTES} bytes"
    return None


def check_paths(arguments: Mapping[str, Any]) -> None:
    for name in _PATH_PARAMS & arguments.keys():
        value = arguments[name]
        for path in value if isinstance(value, list) else [value]:
            problem = path_problem(path) if isinstance(path, str) else None
            if problem:
                shown_path = path if len(path) <= 200 else path[:200] + f"... ({len(path):,} characters)"
                raise PathValidationError(shown_path.encode("utf-8", "backslashreplace").decode("utf-8"), problem)


def require_spec(text: str, what: str = "task_spec") -> str:
    if not text.strip():
        raise ToolError(f"{what} is empty: there is nothing to validate or run")
    return text


def job_view(job: Mapping[str, Any]) -> dict[str, Any]:
    """A job as a tool reports it: status first, then what the run said, if it finished."""
    view: dict[str, Any] = {k: job.get(k) for k in ("job_id", "task_id", "mode", "status", "created_at", "updated_at")}
    if job.get("status") == "halted":
        view["outcome"] = job.get("outcome")
    result = job.get("result")
    if isinstance(result, Mapping):
        for key in ("phase", "message", "branch", "commit", "halted_ref", "discarded", "files", "decision_id", "next"):
            if result.get(key) not in (None, "", []):
                view[key] = result[key]
    if job.get("error"):
        view["error"] = job["error"]
    return view
