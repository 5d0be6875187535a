"""A judged run in the confined workspace itself (the run_tests tool, the pytest validator
without a base) keeps the policy's read-only paths: only a copy is the run's to write."""

from __future__ import annotations

import subprocess
from pathlib import Path

from snodo.judging.request import judge_workspace
from snodo.judging.testrun import run_tests
from snodo.judging.tooling import Options
from snodo.sandbox import SandboxPolicy, confined


def _project(root: Path) -> Path:
    (root / "tests").mkdir(parents=True)
    (root / "secrets").mkdir()
    (root / "secrets" / "prod.key").write_text("kept\n")
    (root / "tests" / "test_write.py").write_text("def test_write():\n    open('secrets/prod.key', 'w').write('x')\n")
    subprocess.run(["git", "init", "-q", str(root)], check=True)
    return root


def test_protected_paths_stay_read_only_for_a_run_in_the_workspace(backend: str, tmp_path: Path) -> None:
    root = _project(tmp_path / "ws")
    with confined(SandboxPolicy(workspace=root, read_only=("secrets",))):
        judged = judge_workspace(root, root, Options(timeout=120))
        tool = run_tests(root, timeout=120)
    assert (root / "secrets" / "prod.key").read_text() == "kept\n"
    assert judged.severity == "blocker" and "tests/test_write.py::test_write (failed)" in judged.justification
    assert not tool.passed and tool.failed_tests == ("tests/test_write.py::test_write",), tool.summary
