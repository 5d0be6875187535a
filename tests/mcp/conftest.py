"""Fixtures of the MCP tests; the harness itself is :mod:`mcp_harness`."""

from __future__ import annotations

import subprocess
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from mcp_harness import snodo


@pytest.fixture(scope="module")
def module_home(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """One ``$SNODO_HOME`` shared by a module's server and the commands its tests run."""
    return tmp_path_factory.mktemp("mcp-home")


@pytest.fixture(scope="module")
def module_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("mcp-project")


@pytest.fixture
def cli(module_home: Path) -> Callable[..., subprocess.CompletedProcess[str]]:
    def run(cwd: Path, *args: str, **kw: Any) -> subprocess.CompletedProcess[str]:
        return snodo(cwd, module_home, *args, **kw)

    return run
