"""The author harness runs the real ``snodo run`` / ``snodo validate`` in a sample project."""

from __future__ import annotations

import pytest
from snodo_conformance.harness import MakeProject

pytestmark = pytest.mark.slow


def test_run_with_the_mock_coder_completes_and_is_audited(snodo_project: MakeProject) -> None:
    project = snodo_project(coder="mock", coder_config={"files": {"hello.py": "x = 1\n"}})
    result = project.run("add a hello module")
    assert result.ret == 0, result.output
    assert result.outcome == "completed", result.output
    assert result.data["files"] == ["hello.py"]
    events = result.events()
    assert events[0] == "session_started"
    assert events[-2:] == ["completed", "attested"], events  # the attestation follows completion


def test_validate_with_a_failing_validator_reports_its_outcome(snodo_project: MakeProject) -> None:
    project = snodo_project(
        validator="pytest",
        phase="pre_execute",
        files={"tests/test_broken.py": "def test_broken():\n    assert False\n"},
    )
    result = project.validate("check the tests")
    assert result.outcome == "blocker", result.output
    assert result.ret == 1
    assert "validate" in result.events()
