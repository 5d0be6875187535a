"""A write the sandbox refused, as the confined program reported it, becomes evidence."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import pytest

from snodo.process.runner import run_process
from snodo.sandbox import SandboxPolicy
from snodo.sandbox.refusals import MAX_REFUSALS, Refusal, find_refusals, governed, record_refusals


def test_refused_writes_reported_by_a_confined_program_are_found_and_recorded(backend: str, tmp_path: Path) -> None:
    ws = tmp_path / "ws"
    (ws / ".snodo").mkdir(parents=True)
    (ws / ".snodo" / "protocol.yml").write_text("x\n")
    script = (
        "for p in ('.snodo/protocol.yml', '/etc/snodo-escape'):\n"
        "    try:\n        open(p, 'w')\n    except OSError as exc:\n        print(exc)\n"
    )
    result = run_process([sys.executable, "-c", script], cwd=ws, timeout=30, sandbox=SandboxPolicy(workspace=ws))
    refusals = find_refusals([result.output])
    assert {r.path for r in refusals} == {".snodo/protocol.yml", "/etc/snodo-escape"}, result.output
    events: list[tuple[str, dict[str, Any]]] = []
    record_refusals(lambda e, **d: events.append((e, d)), refusals, who="opencode", task_id="t")
    assert len(events) == 2
    assert {e for e, _ in events} == {"sandbox_refusal"} and events[0][1]["reported_by"] == "opencode"


def test_other_reporting_styles_and_the_bound() -> None:
    texts = [
        "EROFS: read-only file system, open '/repo/.git/hooks/pre-commit'",
        "sh: 1: cannot create /repo/.snodo/x: Read-only file system",
        "touch: cannot touch '/outside/y': Permission denied",
    ]
    found = find_refusals(texts)
    assert Refusal(path="/repo/.git/hooks/pre-commit", error="read-only file system") in found
    assert Refusal(path="/repo/.snodo/x", error="read-only file system") in found
    assert len(find_refusals([f"[Errno 13] Permission denied: '/p{i}'" for i in range(100)])) == MAX_REFUSALS


@pytest.mark.parametrize("path", ["", "/", ".", "./"])
@pytest.mark.parametrize("pattern", ["", "/", "."])
def test_a_pattern_or_path_with_no_component_names_nothing(path: str, pattern: str) -> None:
    """A protected pattern with no component matches no refusal, not even one whose path has none."""
    assert not governed(Refusal(path=path, error="Permission denied"), [pattern])
