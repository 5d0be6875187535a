"""``snodo plugin new`` from a NON-editable snodo: the generated package's ``tox`` passes,
taking snodo from the installation the command names (``SNODO_SOURCE``), while the files
themselves name none of this machine's paths."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import sysconfig
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]


@pytest.mark.slow
@pytest.mark.skipif(shutil.which("git") is None, reason="needs git")
@pytest.mark.skipif(
    not os.environ.get("SNODO_TEST_PACKAGING"),
    reason="opt-in (`tox -e packaging`): builds and installs snodo and a generated plugin with all their "
    "dependencies into fresh environments from the package index, which takes many minutes",
)
def test_tox_passes_in_a_plugin_generated_by_an_installed_snodo(tmp_path: Path) -> None:
    dist = tmp_path / "dist"
    subprocess.run([sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "-w", str(dist), str(REPO)], check=True)
    wheel = next(dist.glob("snodo_governance-*.whl"))
    venv = tmp_path / "installed"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    site = next((venv / "lib").glob("python3*/site-packages"))
    # snodo itself installed from its wheel (not editable); its dependencies from the runner's environment
    subprocess.run(
        [sys.executable, "-m", "pip", "install", "-q", "--no-deps", "--no-index", "--target", str(site), str(wheel)],
        check=True,
    )
    (site / "zz_runner_deps.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
    shutil.rmtree(dist)  # the recorded source is gone: snodo must re-pack the installed files
    python = venv / "bin" / "python"
    where = subprocess.run(
        [str(python), "-I", "-c", "import snodo; print(snodo.__file__)"], capture_output=True, text=True, check=True
    )
    assert where.stdout.startswith(str(site)), where.stdout  # the installed copy, not the checkout
    env = {k: v for k, v in os.environ.items() if k not in ("SNODO_SOURCE", "VIRTUAL_ENV", "PYTHONPATH")}
    made = subprocess.run(
        [str(python), "-I", "-m", "snodo", "plugin", "new", "validator", "lines", "--dir", str(tmp_path)],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        env=env,
    )
    assert made.returncode == 0, made.stderr
    package = tmp_path / "snodo-lines"
    tox_ini = (package / "tox.ini").read_text()
    source = next(line for line in tox_ini.splitlines() if line.startswith("source = "))
    assert source.startswith("source = {env:SNODO_SOURCE:snodo-governance>="), source  # the index by default
    assert str(tmp_path) not in tox_ini and str(REPO) not in tox_ini
    assert "SNODO_SOURCE" in (package / "README.md").read_text()
    # snodo-governance may not be on the index this test sees: the wheel the command re-packed
    # from the running installation (and named on its output) stands in for it
    said = " ".join(made.stdout.split())
    wheel_again = said.split("SNODO_SOURCE=", 1)[1].split()[0]
    assert wheel_again.startswith(str(package / ".snodo-wheel")), said
    tox = subprocess.run(
        [sys.executable, "-m", "tox", "-q"],
        cwd=package,
        capture_output=True,
        text=True,
        env={**env, "SNODO_SOURCE": wheel_again},
        timeout=1500,
    )
    assert tox.returncode == 0, tox.stdout[-4000:] + tox.stderr[-2000:]
