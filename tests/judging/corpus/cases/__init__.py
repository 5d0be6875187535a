"""The corpus's changes: honest ones and cheats, each applied on top of a task's base.

A case is a plain dict (``family``, ``name``, ``task``, ``files`` {path: content}, ``delete``
[paths], ``expect`` "pass" | "escalate" | "blocker", ``why``; optionally ``binary``
{path: how to build its bytes}), gathered here as :class:`Case`. ``expect`` follows SPEC §3
"Judging tests"; for a cheat either blocker or escalate counts as caught (a cheat may earn
both, and the stronger wins), never pass or validator_error.
"""

from __future__ import annotations

import importlib.util
import sys
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any

from . import code, honest, runtime, tests_and_config

FAMILIES = (
    "honest",
    "honest-refactor",
    "test-tampering",
    "conftest-hooks",
    "pytest-config",
    "plugin-injection",
    "package-monkeypatch",
    "early-exit",
    "special-casing",
    "env-detection",
    "hang",
    "bytecode",
    "shadowing",
    "added-test-cheat",
    "regression",
)
HONEST = frozenset({"honest", "honest-refactor"})


@dataclass(frozen=True)
class Case:
    family: str
    name: str
    task: str
    expect: str
    why: str
    files: MappingProxyType[str, str] = field(default_factory=lambda: MappingProxyType({}))
    delete: tuple[str, ...] = ()
    binary: MappingProxyType[str, Any] = field(default_factory=lambda: MappingProxyType({}))

    @property
    def cheat(self) -> bool:
        return self.family not in HONEST

    def binary_files(self) -> dict[str, bytes]:
        """The binary files, built for the interpreter running this (snodo's own, which
        runs the library's tests): ``{tag}`` in a path is its bytecode cache tag."""
        return {path.format(tag=sys.implementation.cache_tag): build_binary(how) for path, how in self.binary.items()}


def build_binary(how: dict[str, Any]) -> bytes:
    """An unchecked hash-based ``.pyc`` of ``how["source"]``: Python loads it without looking
    at the source beside it (PEP 552), so the bytecode runs whatever the ``.py`` says."""
    if how["kind"] != "pyc":
        raise ValueError(f"unknown binary kind {how['kind']!r}")
    from importlib import _bootstrap_external  # the stdlib's own writer of .pyc files

    source = how["source"].encode()
    code_obj = compile(source, how.get("filename", "<corpus>"), "exec")
    return bytes(_bootstrap_external._code_to_hash_pyc(code_obj, importlib.util.source_hash(source), checked=False))


def _case(raw: dict[str, Any]) -> Case:
    unknown = set(raw) - {"family", "name", "task", "expect", "why", "files", "delete", "binary"}
    if unknown or raw["family"] not in FAMILIES or raw["expect"] not in ("pass", "escalate", "blocker"):
        raise ValueError(f"bad case {raw.get('name')!r}: {sorted(unknown) or raw['family'] or raw['expect']}")
    return Case(
        family=raw["family"],
        name=raw["name"],
        task=raw["task"],
        expect=raw["expect"],
        why=raw["why"],
        files=MappingProxyType(dict(raw.get("files", {}))),
        delete=tuple(raw.get("delete", ())),
        binary=MappingProxyType(dict(raw.get("binary", {}))),
    )


ALL: tuple[Case, ...] = tuple(
    _case(raw) for module in (honest, tests_and_config, runtime, code) for raw in module.CASES
)
BY_NAME = {c.name: c for c in ALL}
if len(BY_NAME) != len(ALL):
    raise ValueError("two corpus cases share a name")
