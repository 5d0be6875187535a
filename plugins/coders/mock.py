"""The ``mock`` coder: deterministic output, no model, no network.

``snodo run --mock`` and ``snodo demo`` use it so the whole life cycle runs offline while
the validators judge real files. By default it writes a small module named from the spec
and a test that passes under ``python -m pytest -q`` from the project root; on a fix
attempt the module's header names the attempt, so successive attempts differ while each
stays reproducible.

``coder_config`` may instead dictate the exact operations (``files: {path: content}``,
``delete: [paths]``). Those are emitted exactly as given, ``.snodo/`` paths included:
filtering protected paths is the engine's job, and engine tests rely on the mock to
propose what a misbehaving coder would.
"""

from __future__ import annotations

import keyword
import re
import sys
from collections.abc import Iterator, Mapping
from typing import Any

from snodo.api import (
    CoderCapabilities,
    CoderError,
    CoderRequest,
    CoderResult,
    CoderSpec,
    FileOperation,
    Setting,
    hookimpl,
)

from ._config import CoderConfig

SETTINGS = (Setting("files", "mapping"), Setting("delete", "strings"))

# Words that describe the request rather than name the thing requested.
_FILLER = (
    "a an the new small simple tiny python module modules function functions class file "
    "add create write implement make build please fix edit update refactor change with "
    "and for that which named called to of in"
)
_STOPWORDS = frozenset(_FILLER.split())
# Names the generated module must not take: importing them from the project root would
# shadow the standard library or the test runner itself.
_RESERVED = frozenset(sys.stdlib_module_names) | {"pytest", "pluggy", "snodo", "setup", "conftest", "tests"}

_MODULE_HINTS = (
    re.compile(r"`([A-Za-z_]\w*)\.py`"),
    re.compile(r"\bmodule\s+(?:named|called)\s+[`'\"]?([A-Za-z_]\w*)", re.IGNORECASE),
    re.compile(r"\b([A-Za-z_]\w*)\s+module\b", re.IGNORECASE),
    re.compile(r"\b([A-Za-z_]\w*)\b"),
)
_FUNCTION_HINTS = re.compile(r"\bfunction\s+`([A-Za-z_]\w*)(?:\(\))?`|`([A-Za-z_]\w*)\(\)`", re.IGNORECASE)


def module_name(spec: str) -> str:
    """The module a spec asks for: a named ``x.py``, "module named x", "x module", else a word."""
    for pattern in _MODULE_HINTS:
        for match in pattern.finditer(spec):
            name = match.group(1).lower()
            if name not in _STOPWORDS and len(name) >= 3:
                return _safe(name)
    return "feature"


def _safe(name: str) -> str:
    if keyword.iskeyword(name) or name in _RESERVED:
        return f"{name}_feature"
    if name.startswith("test") or name.endswith("_test"):
        return f"mod_{name}"  # pytest would otherwise collect the module itself as a test file
    return name


def _functions(spec: str, module: str) -> list[str]:
    names = [module]
    for match in _FUNCTION_HINTS.finditer(spec):
        name = match.group(1) or match.group(2)
        if name not in names and not keyword.iskeyword(name):
            names.append(name)
    return names


def _task_line(spec: str) -> str:
    for line in spec.splitlines():
        text = line.strip().lstrip("#").strip()
        if text:
            return text[:100]
    return "(empty spec)"


def default_operations(spec: str, attempt: int) -> tuple[FileOperation, FileOperation]:
    """The module and its passing test; the header names the fix attempt when there is one."""
    module = module_name(spec)
    functions = _functions(spec, module)
    header = [
        f"# {module}.py: written by snodo's mock coder (deterministic, no model).",
        f"# task: {_task_line(spec)}",
    ]
    if attempt > 0:
        header.append(f"# attempt {attempt}: revised after the validators' findings")
    body = "".join(
        f'\n\ndef {name}() -> str:\n    """Return this function\'s own name, which the test checks."""\n'
        f'    return "{name}"\n'
        for name in functions
    )
    source = "\n".join(header) + '\n"""A small module the mock coder derived from the task spec."""\n' + body
    checks = "".join(
        f'\n\ndef test_{name}() -> None:\n    assert {module}.{name}() == "{name}"\n' for name in functions
    )
    test = f"import {module}\n" + checks
    return (
        FileOperation(op="write", path=f"{module}.py", content=source),
        FileOperation(op="write", path=f"tests/test_{module}.py", content=test),
    )


def _configured(config: CoderConfig) -> Iterator[FileOperation]:
    files = config.raw.get("files", {})
    if not isinstance(files, Mapping) or not all(
        isinstance(p, str) and p and isinstance(c, str) for p, c in files.items()
    ):
        raise CoderError("coder 'mock': coder_config.files must map non-empty paths to string contents")
    for path, content in files.items():
        yield FileOperation(op="write", path=path, content=content)
    deletes = config.strings("delete")
    if not all(deletes):
        raise CoderError("coder 'mock': coder_config.delete must list non-empty paths")
    for path in deletes:
        yield FileOperation(op="delete", path=path)


class MockCoder:
    """One ``coder_config`` read strictly: a bad ``files``/``delete`` value is refused on
    construction, which :func:`snodo_preflight` does before any token is spent."""

    def __init__(self, config: Mapping[str, Any]) -> None:
        self.config = CoderConfig("mock", config, SETTINGS)
        self.dictated = tuple(_configured(self.config)) if config else None

    def generate(self, request: CoderRequest) -> CoderResult:
        dictated = self.dictated
        ops = dictated if dictated is not None else default_operations(request.spec, request.attempt)
        summary = "mock coder: " + ", ".join(f"{op.op} {op.path}" for op in ops) if ops else "mock coder: nothing"
        return CoderResult(operations=ops, summary=summary)


@hookimpl
def snodo_coders() -> Iterator[CoderSpec]:
    yield CoderSpec(
        name="mock",
        description="deterministic offline coder: a small module plus a passing test, or the "
        "exact files given in coder_config",
        capabilities=CoderCapabilities(
            writes_in_place=False,
            commits_own_changes=False,
            settings=SETTINGS,
            needs_network=False,
            deterministic=True,
        ),
    )


@hookimpl
def snodo_generate(name: str, request: CoderRequest) -> CoderResult | None:
    return MockCoder(request.config).generate(request) if name == "mock" else None


@hookimpl
def snodo_preflight(coder: str, coder_config: Mapping[str, Any]) -> None:
    """Dictated operations that cannot be written are refused before any token is spent."""
    if coder == "mock":
        MockCoder(coder_config)
