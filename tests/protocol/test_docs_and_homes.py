"""The docs say what the code does (task-spec shapes, plugin settings), and the strict
converter has one home."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from snodo_plugins.validators._criteria import classify, from_spec

from snodo.plugin.host import get_plugin_manager

REPO = Path(__file__).resolve().parents[2]
TASKS = (REPO / "docs" / "tasks.md").read_text()
PROTOCOL = (REPO / "docs" / "protocol.md").read_text()

#: Every example docs/tasks.md gives for a mechanical shape, and the check it must be.
SHAPES = [
    ("file `docs/usage.md` exists", "exists", "docs/usage.md"),
    ("`greeting.py` is created", "exists", "greeting.py"),
    ("`old.py` does not exist", "absent", "old.py"),
    ("function `greeting` is defined", "defined", "greeting"),
    ("`Parser` is implemented in `parse.py`", "defined", "Parser"),
    ("`greeting.py` defines `greeting`", "defined", "greeting"),
    ("class `Parser` exists", "defined", "Parser"),
    ("tests pass", "tests", ""),
    ("all tests pass", "tests", ""),
    ("the test suite passes", "tests", ""),
    ("pytest succeeds", "tests", ""),
]


@pytest.mark.parametrize(("sentence", "kind", "target"), SHAPES)
def test_documented_shapes_are_the_checked_ones(sentence: str, kind: str, target: str) -> None:
    assert sentence in TASKS, f"docs/tasks.md no longer shows {sentence!r}"
    check = classify(sentence)
    assert check is not None and (check.kind, check.target) == (kind, target)


def test_documented_prose_examples_stay_prose() -> None:
    for sentence in ("the greeting is friendly", "`a.py` exists and is tidy"):
        assert sentence in TASKS and classify(sentence) is None


def test_the_example_spec_yields_its_four_criteria() -> None:
    example = re.search(r"```markdown\n(.*?)```", TASKS, re.S)
    assert example is not None
    criteria = from_spec(example.group(1))
    assert [c is not None for c in map(classify, criteria)] == [True, True, True, False]


def test_every_builtin_setting_is_documented() -> None:
    host = get_plugin_manager()
    # the test-running validators are documented in validators.md, the model judges' provider
    # settings in coders.md (every built-in coder and model judge)
    validators_doc = "".join((REPO / "docs" / page).read_text() for page in ("validators.md", "coders.md"))
    for name, spec in host.validators().items():
        for setting in spec.settings:
            assert f"`{setting}`" in validators_doc, (
                f"validator {name}: setting {setting!r} not in docs/validators.md or docs/coders.md"
            )
    for name, coder in host.coders().items():
        assert f"`{name}` takes" in PROTOCOL, f"docs/protocol.md does not list the settings of coder {name!r}"
        documented = PROTOCOL[PROTOCOL.index(f"`{name}` takes") :].split(";")[0]
        assert all(f"`{s}`" in documented for s in coder.capabilities.settings), (name, documented)


def test_one_strict_converter_in_one_home() -> None:
    """Every structured file goes through snodo/base/convert.py; no second converter creeps back."""
    made = []
    for path in sorted((REPO / "snodo").rglob("*.py")) + sorted((REPO / "plugins").rglob("*.py")):
        text = path.read_text()
        if re.search(r"\b(?:cattrs\.)?(?:Converter|GenConverter|BaseConverter|make_converter)\s*\(", text):
            made.append(path.relative_to(REPO).as_posix())
    assert made == ["snodo/base/convert.py"]
    for user in ("snodo/protocol/loader.py", "snodo/state/atomic.py"):
        assert "from snodo.base.convert import CONVERTER" in (REPO / user).read_text(), user
