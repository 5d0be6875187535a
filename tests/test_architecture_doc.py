"""docs/architecture.md's "where each rule lives" table points at code that exists."""

from __future__ import annotations

import importlib
import re
from pathlib import Path

import pytest

ARCHITECTURE = Path(__file__).resolve().parent.parent / "docs" / "architecture.md"
ROW = re.compile(r"^\|\s*(?P<rule>[^|]+?)\s*\|\s*`(?P<file>snodo/[\w/]+\.py):(?P<name>[\w.]+)`\s*\|$")


def homes() -> list[tuple[str, str, str]]:
    text = ARCHITECTURE.read_text()
    section = text.split("## Where each rule lives", 1)[1].split("\n## ", 1)[0]
    rows = [m for line in section.splitlines() if (m := ROW.match(line.strip()))]
    return [(m["rule"], m["file"], m["name"]) for m in rows]


def test_the_table_names_every_rule_the_design_promises() -> None:
    rules = " ".join(rule.lower() for rule, _, _ in homes())
    for needle in (
        "path guard",
        "child processes",
        "policy",
        "inv3",
        "token issue",
        "token consume",
        "audit append",
        "audit verify",
        "decision verification",
        "confinement",
        "in-place",
        "git",
        "test-run reader",
        "converter",
    ):
        assert needle in rules, needle
    # every row of the section parsed: a malformed row must not silently drop out
    section = ARCHITECTURE.read_text().split("## Where each rule lives", 1)[1].split("\n## ", 1)[0]
    assert len(homes()) == sum(1 for line in section.splitlines() if line.startswith("| ") and "`snodo/" in line)


@pytest.mark.parametrize(("rule", "file", "name"), homes(), ids=[h[2] for h in homes()])
def test_each_home_exists(rule: str, file: str, name: str) -> None:
    module = importlib.import_module(file.removesuffix(".py").replace("/", "."))
    target: object = module
    for part in name.split("."):
        assert hasattr(target, part), f"{rule}: {file} has no {name}"
        target = getattr(target, part)
    assert callable(target) or name.isupper(), f"{rule}: {file}:{name} is neither a function nor a constant"
