"""The forbidden-imports validator on its own, through the hook as the runner calls it.

Only :mod:`snodo.api` is imported: the protocol records a request carries are stood in for
by plain namespaces holding the fields this validator reads. The conformance kit
(test_conformance.py) runs it with the real records, through snodo's own runner.
"""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
from snodo_forbidden_imports import snodo_validate

from snodo.api import ValidationRequest, ValidatorFault


def request(
    workspace: Path, changed: tuple[str, ...], tooling: dict[str, Any] | None = None, vtype: str = "forbidden-imports"
) -> ValidationRequest:
    validator: Any = SimpleNamespace(
        validator_id="no-subprocess",
        validator_type=vtype,
        tooling={"forbidden": ["subprocess", "os.system"]} if tooling is None else tooling,
    )
    mode: Any = SimpleNamespace(mode_id="dev")
    protocol: Any = SimpleNamespace(protocol_id="p")
    return ValidationRequest(
        validator=validator,
        task_id="t1",
        task_spec="add a module",
        phase="post_execute",
        mode=mode,
        protocol=protocol,
        workspace=workspace,
        changed_files=changed,
    )


def write(root: Path, files: dict[str, str]) -> Path:
    for rel, text in files.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(text)
    return root


def test_a_clean_change_passes(tmp_path: Path) -> None:
    write(tmp_path, {"app.py": "import json\nfrom os import path\n"})
    verdict = snodo_validate(name="forbidden-imports", request=request(tmp_path, ("app.py", "README.md")))
    assert verdict is not None and verdict.severity == "pass"


@pytest.mark.parametrize(
    "source",
    [
        "import subprocess\n",
        "import subprocess.sub as s\n",
        "from subprocess import run\n",
        "def f():\n    from os import system\n",
    ],
)
def test_a_forbidden_import_is_a_blocker_naming_file_and_line(tmp_path: Path, source: str) -> None:
    write(tmp_path, {"pkg/tool.py": source})
    verdict = snodo_validate(name="forbidden-imports", request=request(tmp_path, ("pkg/tool.py",)))
    assert verdict is not None and verdict.severity == "blocker"
    assert "pkg/tool.py:" in verdict.justification


def test_unchanged_files_and_deleted_files_are_not_judged(tmp_path: Path) -> None:
    write(tmp_path, {"old.py": "import subprocess\n"})
    verdict = snodo_validate(name="forbidden-imports", request=request(tmp_path, ("gone.py",)))
    assert verdict is not None and verdict.severity == "pass"


def test_other_validator_types_are_left_to_their_plugins(tmp_path: Path) -> None:
    assert snodo_validate(name="pytest", request=request(tmp_path, (), vtype="pytest")) is None


@pytest.mark.parametrize("tooling", [{}, {"forbidden": []}, {"forbidden": "subprocess"}, {"forbiden": ["x"]}])
def test_a_misconfiguration_fails_closed(tmp_path: Path, tooling: dict[str, Any]) -> None:
    with pytest.raises(ValidatorFault):
        snodo_validate(name="forbidden-imports", request=request(tmp_path, ("a.py",), tooling))


def test_a_missing_workspace_or_unparsable_file_fails_closed(tmp_path: Path) -> None:
    with pytest.raises(ValidatorFault, match="not a directory"):
        snodo_validate(name="forbidden-imports", request=request(tmp_path / "nowhere", ("a.py",)))
    write(tmp_path, {"bad.py": "def (:\n"})
    with pytest.raises(ValidatorFault, match="does not parse"):
        snodo_validate(name="forbidden-imports", request=request(tmp_path, ("bad.py",)))
