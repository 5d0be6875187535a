"""How the project's interpreter is found when no setting names it: from files only, in
SPEC §9's order, refusing what leads out of the project."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

from snodo.workspace import interpreter
from snodo.workspace.interpreter import SNODO_OWN, discover


def venv(path: Path) -> Path:
    """A directory that looks like a virtual environment: pyvenv.cfg and bin/python."""
    (path / "bin").mkdir(parents=True)
    (path / "pyvenv.cfg").write_text("home = /usr/bin\n")
    os.symlink(sys.executable, path / "bin" / "python")
    return path / "bin" / "python"


@pytest.fixture(autouse=True)
def _no_startup_env(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(interpreter, "STARTUP_VIRTUAL_ENV", None)
    monkeypatch.setattr(interpreter, "STARTUP_UV_ENV", None)


def test_nothing_found_is_snodos_own(tmp_path: Path) -> None:
    assert discover(tmp_path) == interpreter.ProjectPython(path=sys.executable, source=SNODO_OWN)


def test_the_order_virtual_env_then_dot_venv_then_venv(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    root = Path(os.path.realpath(tmp_path))
    plain = venv(root / "venv")
    assert discover(root).path == str(plain) and discover(root).source == "venv/"
    dot = venv(root / ".venv")
    assert discover(root).source == ".venv/" and discover(root).path == str(dot)
    active = venv(root / "envs" / "dev")
    monkeypatch.setattr(interpreter, "STARTUP_VIRTUAL_ENV", str(root / "envs" / "dev"))
    assert discover(root).path == str(active) and discover(root).source == "$VIRTUAL_ENV"


def test_a_virtual_env_outside_the_project_is_not_the_projects(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    venv(tmp_path / "elsewhere")
    monkeypatch.setattr(interpreter, "STARTUP_VIRTUAL_ENV", str(tmp_path / "elsewhere"))
    (tmp_path / "proj").mkdir()
    assert discover(tmp_path / "proj").source == SNODO_OWN


def test_a_symlink_leading_out_of_the_project_is_refused(tmp_path: Path) -> None:
    venv(tmp_path / "outside")
    root = tmp_path / "proj"
    root.mkdir()
    os.symlink(tmp_path / "outside", root / ".venv")
    assert discover(root).source == SNODO_OWN


def test_a_directory_without_pyvenv_cfg_is_no_environment(tmp_path: Path) -> None:
    venv(tmp_path / ".venv")
    (tmp_path / ".venv" / "pyvenv.cfg").unlink()
    assert discover(tmp_path).source == SNODO_OWN


def test_hatch_and_pdm_from_their_files_inside_the_project_only(tmp_path: Path) -> None:
    root = Path(os.path.realpath(tmp_path))
    hatch = venv(root / "envs" / "hatch")
    (root / "pyproject.toml").write_text('[tool.hatch.envs.default]\npath = "envs/hatch"\n')
    assert discover(root).path == str(hatch) and discover(root).source.startswith("Hatch")
    (root / "pyproject.toml").write_text('[tool.hatch.envs.default]\npath = "../../"\n')  # hostile: outside
    pdm = venv(root / "pdmenv")
    (root / ".pdm-python").write_text(str(pdm) + "\n")
    assert discover(root).path == str(pdm) and discover(root).source.startswith("PDM")
    (root / ".pdm-python").write_text("/usr/bin/python3\n")  # outside the project: refused
    assert discover(root).source == SNODO_OWN


def test_poetry_in_project_and_uv_project_environment(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    root = Path(os.path.realpath(tmp_path))
    (root / "pyproject.toml").write_text('[tool.poetry]\nname = "demo"\n')
    (root / "poetry.toml").write_text("[virtualenvs]\nin-project = true\n")
    assert discover(root).source == SNODO_OWN  # declared, but not created yet
    uv_env = venv(tmp_path.parent / f"{tmp_path.name}-uvenv")
    (root / "uv.lock").write_text("")
    monkeypatch.setattr(interpreter, "STARTUP_UV_ENV", str(uv_env.parent.parent))
    assert discover(root).path == str(uv_env) and discover(root).source.startswith("uv")


def test_discovery_runs_nothing(tmp_path: Path) -> None:
    """A project's python that would leave a mark if run is never run to be found."""
    root = Path(os.path.realpath(tmp_path))
    (root / ".venv" / "bin").mkdir(parents=True)
    (root / ".venv" / "pyvenv.cfg").write_text("home = /usr/bin\n")
    marker = root / "ran"
    script = root / ".venv" / "bin" / "python"
    script.write_text(f"#!/bin/sh\ntouch {marker}\n")
    script.chmod(0o755)
    assert discover(root).path == str(script)
    assert not marker.exists()


def test_init_names_the_found_interpreter_but_writes_nothing_of_this_machine(tmp_path: Path, snodo_cli) -> None:  # type: ignore[no-untyped-def]
    import sys

    venv(tmp_path / ".venv")
    shown = snodo_cli("init", cwd=tmp_path)
    assert shown.returncode == 0 and ".venv/bin/python (from .venv/" in shown.stdout, shown
    text = (tmp_path / ".snodo" / "protocol.yml").read_text()
    assert "\nexecution:\n  # python: left unset on purpose" in text
    assert str(tmp_path) not in text and sys.executable not in text and "bin/python" not in text
    assert snodo_cli("protocol", "check", cwd=tmp_path).returncode == 0
    bare = tmp_path / "bare"  # no project environment: snodo's own interpreter is found, and not written either
    bare.mkdir()
    as_json = snodo_cli("init", "--json", cwd=bare)
    assert as_json.json()["python"]["path"] and sys.executable not in (bare / ".snodo" / "protocol.yml").read_text()
