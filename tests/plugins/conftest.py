"""Fixtures for the built-in plugin tests: real projects in tmp dirs, real git, the real
plugin host loaded through the entry points, and litellm kept offline (``mock_response``)."""

from __future__ import annotations

import hashlib
import os
import subprocess
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")  # before anything imports litellm

from snodo.api import ValidationRequest
from snodo.plugin.host import PluginHost, get_plugin_manager
from snodo.protocol.models import Mode, Protocol, Validator

HERE = Path(__file__).resolve().parent


@pytest.fixture(scope="session")
def host() -> PluginHost:
    return get_plugin_manager()


@pytest.fixture
def project(tmp_path: Path) -> Callable[..., Path]:
    """``project({path: content}, git=True)`` -> a project dir, committed when ``git``."""

    def make(files: dict[str, str], *, git: bool = False, name: str = "proj") -> Path:
        root = tmp_path / name
        root.mkdir()
        for rel, content in files.items():
            (root / rel).parent.mkdir(parents=True, exist_ok=True)
            (root / rel).write_text(content)
        if git:
            for args in (
                ["init", "-q", "-b", "main"],
                ["config", "user.email", "dev@example.com"],
                ["config", "user.name", "Dev"],
                ["add", "-A"],
                ["commit", "-q", "-m", "initial"],
            ):
                subprocess.run(["git", "-C", str(root), *args], check=True, capture_output=True)
        return root

    return make


def _snapshot(root: Path) -> dict[str, str]:
    state: dict[str, str] = {}
    for dirpath, dirnames, filenames in os.walk(root):
        for d in dirnames:
            state[os.path.relpath(os.path.join(dirpath, d), root) + "/"] = "dir"
        for f in filenames:
            path = os.path.join(dirpath, f)
            with open(path, "rb") as fh:
                state[os.path.relpath(path, root)] = hashlib.sha256(fh.read()).hexdigest()
    return state


@pytest.fixture
def snapshot() -> Callable[[Path], dict[str, str]]:
    """Every file (``.git`` included) and directory under a root, with content hashes."""
    return _snapshot


@pytest.fixture
def vrequest() -> Callable[..., ValidationRequest]:
    """Build a ValidationRequest for one validator inside a one- or two-mode protocol
    (``others``: more validators of the same mode, e.g. the same type in the other phase)."""

    def make(
        workspace: Path,
        vtype: str,
        *,
        spec: str = "add a hello module",
        phase: str = "post_execute",
        criteria: tuple[str, ...] = (),
        tooling: dict[str, Any] | None = None,
        model: str | None = None,
        tools: tuple[str, ...] = ("read", "edit", "test"),
        other_modes: tuple[Mode, ...] = (),
        changed_files: tuple[str, ...] = (),
        timeout: float = 60.0,
        others: tuple[Validator, ...] = (),
    ) -> ValidationRequest:
        validator = Validator(
            validator_id=f"{vtype}-check",
            validator_type=vtype,
            evaluation_phase=phase,  # type: ignore[arg-type]
            criteria=criteria,
            tooling=tooling or {},
            model=model,
        )
        ids = (validator.validator_id, *(v.validator_id for v in others))
        mode = Mode(mode_id="dev", name="Development", tools=tools, validators=ids, coder="mock")
        protocol = Protocol(protocol_id="p", name="P", modes=(mode, *other_modes), validators=(validator, *others))
        return ValidationRequest(
            validator=validator,
            task_id="task-1",
            task_spec=spec,
            phase=phase,
            mode=mode,
            protocol=protocol,
            workspace=workspace,
            changed_files=changed_files,
            timeout=timeout,
        )

    return make


def alive(pid: int) -> bool:
    """Whether ``pid`` is a live process (a zombie awaiting its reaper counts as gone)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except FileNotFoundError:
        return False
    return stat.rsplit(")", 1)[1].split()[0] != "Z"


@pytest.fixture
def is_alive() -> Callable[[int], bool]:
    return alive


@pytest.fixture
def ws(project: Callable[..., Path]) -> Path:
    """A small committed project: a README and one source file."""
    return project({"README.md": "# demo\n", "src/app.py": "print('app')\n"})
