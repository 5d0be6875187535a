"""No validator changes the workspace: every file and directory, ``.git`` included, is the
same after judging as before (no byte-code, no pytest cache, no git index refresh)."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from snodo.api import ValidationRequest
from snodo.plugin.host import PluginHost

TREE = {
    "hello.py": "def hello():\n    return 'hi'\n",
    "tests/test_hello.py": "import hello\n\n\ndef test_hello():\n    assert hello.hello() == 'hi'\n",
    "pkg/__init__.py": "",
    "pkg/util.py": "VALUE = 1\n",
    "tests/test_util.py": "from pkg import util\n\n\ndef test_value():\n    assert util.VALUE == 1\n",
}
SPEC = """Add a hello module

Done when:
- `hello.py` exists
- `hello` is defined
- tests pass
- it reads well
"""
VERDICT = json.dumps({"severity": "warn", "justification": "reads fine, one doubt"})

CASES: list[tuple[str, str, dict[str, Any]]] = [
    ("pytest", "post_execute", {}),
    ("acceptance", "post_execute", {}),
    ("acceptance", "post_execute", {"model": "openai/gpt-4o-mini", "tooling": {"mock_response": VERDICT}}),
    ("acceptance", "pre_execute", {}),
    ("protocol", "pre_execute", {}),
    ("protocol", "pre_execute", {"model": "openai/gpt-4o-mini", "tooling": {"mock_response": VERDICT}}),
    ("llm", "post_execute", {"model": "openai/gpt-4o-mini", "tooling": {"mock_response": VERDICT}}),
]


@pytest.mark.parametrize(("vtype", "phase", "extra"), CASES)
def test_validator_leaves_the_tree_untouched(
    host: PluginHost,
    project: Callable[..., Path],
    vrequest: Callable[..., ValidationRequest],
    snapshot: Callable[[Path], dict[str, str]],
    monkeypatch: pytest.MonkeyPatch,
    vtype: str,
    phase: str,
    extra: dict[str, Any],
) -> None:
    # The validators must keep the tree clean themselves, not rely on the caller's environment.
    monkeypatch.delenv("PYTHONDONTWRITEBYTECODE", raising=False)
    monkeypatch.delenv("PYTEST_ADDOPTS", raising=False)
    root = project(TREE, git=True)
    (root / "notes.txt").write_text("uncommitted\n")  # a dirty tree must stay dirty, not be "fixed"
    before = snapshot(root)
    verdict = host.validate(vrequest(root, vtype, spec=SPEC, phase=phase, changed_files=("hello.py",), **extra))
    assert verdict is not None
    assert snapshot(root) == before
