"""Fixtures of the governance tests."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from tests.conftest import CliResult, make_repo


@pytest.fixture
def project(tmp_path: Path, snodo_cli: Callable[..., CliResult]) -> Path:
    """A committed repository with the solo template's protocol, made by `snodo init`."""
    repo = make_repo(tmp_path / "proj")
    assert snodo_cli("init", "--template", "solo", cwd=repo).returncode == 0
    return repo
