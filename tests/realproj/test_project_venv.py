"""A real project with its own ``.venv``: snodo finds the project's interpreter with no
setting, says which one it used, and a missing dependency halts with its real cause.

The project is src-layout; its tests import ``realproj_dep``, a package installed (with
pip, from a local wheel, ``--no-index --no-deps``) only into the project's own virtual
environment. pytest reaches that environment through a ``.pth`` line naming the test
runner's site-packages, so nothing is downloaded.
"""

from __future__ import annotations

import base64
import hashlib
import shutil
import subprocess
import sys
import sysconfig
import zipfile
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.conftest import CliResult, git, make_repo, write_producer_protocol

DEP = "realproj_dep"


def _wheel(directory: Path) -> Path:
    """A minimal, valid wheel of ``realproj_dep`` (a wheel is a zip with its metadata)."""
    files = {
        f"{DEP}/__init__.py": b"VALUE = 42\n",
        f"{DEP}-1.0.dist-info/METADATA": b"Metadata-Version: 2.1\nName: realproj-dep\nVersion: 1.0\n",
        f"{DEP}-1.0.dist-info/WHEEL": b"Wheel-Version: 1.0\nGenerator: test\nRoot-Is-Purelib: true\nTag: py3-none-any\n",
    }
    record = []
    for name, data in files.items():
        digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
        record.append(f"{name},sha256={digest},{len(data)}")
    record.append(f"{DEP}-1.0.dist-info/RECORD,,")
    path = directory / f"{DEP}-1.0-py3-none-any.whl"
    with zipfile.ZipFile(path, "w") as wheel:
        for name, data in files.items():
            wheel.writestr(name, data)
        wheel.writestr(f"{DEP}-1.0.dist-info/RECORD", "\n".join(record) + "\n")
    return path


def _site_packages(venv: Path) -> Path:
    return next((venv / "lib").glob("python3*/site-packages"))


@pytest.fixture
def project(tmp_path: Path) -> Path:
    repo = make_repo(tmp_path / "proj")
    (repo / "pyproject.toml").write_text('[project]\nname = "calc"\nversion = "0.1"\n')
    (repo / "src" / "calc").mkdir(parents=True)
    (repo / "src" / "calc" / "__init__.py").write_text(
        "from realproj_dep import VALUE\n\ndef answer():\n    return VALUE\n"
    )
    (repo / "tests").mkdir()
    (repo / "tests" / "test_calc.py").write_text(
        "from calc import answer\n\ndef test_answer():\n    assert answer() == 42\n"
    )
    (repo / ".gitignore").write_text(".venv/\n")
    write_producer_protocol(repo)
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", "project")
    venv = repo / ".venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    site = _site_packages(venv)
    # pytest (and its dependencies) from the runner's environment, without downloading it.
    (site / "test_runner.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
    subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "install",
            "-q",
            "--no-index",
            "--no-deps",
            "--target",
            str(site),
            str(_wheel(tmp_path)),
        ],
        check=True,
    )
    return repo


def test_the_projects_venv_is_found_and_named(project: Path, snodo_cli: Callable[..., CliResult]) -> None:
    python = str(project / ".venv" / "bin" / "python")
    validated = snodo_cli("validate", "make answer() return 42", "--phase", "post_execute", "--json", cwd=project)
    assert validated.returncode == 0, validated
    tests = next(r for r in validated.json()["results"] if r["validator_id"] == "tests")
    assert tests["severity"] == "pass", tests
    ran = snodo_cli("run", "make answer() return 42", "--mock", "--json", cwd=project)
    assert ran.returncode == 0, ran
    payload = ran.json()
    assert payload["status"] == "completed", payload
    assert payload["python"] == {"path": python, "source": ".venv/"}
    assert f"project interpreter: {python} (.venv/)" in ran.stderr.splitlines()[0]
    doctor = snodo_cli("doctor", "--json", cwd=project)
    assert doctor.json()["python"] == {"path": python, "source": ".venv/"}


def test_a_dependency_missing_from_the_venv_halts_with_its_cause(
    project: Path, snodo_cli: Callable[..., CliResult]
) -> None:
    shutil.rmtree(_site_packages(project / ".venv") / DEP)
    ran = snodo_cli("run", "make answer() return 42", "--mock", cwd=project)
    assert ran.returncode == 1, ran
    shown = " ".join(ran.stdout.split())
    assert "validator_error" in shown  # the validator could not judge: not a blocker
    assert "ModuleNotFoundError: No module named 'realproj_dep'" in shown, ran.stdout
    assert "execution.python" in shown  # the next step names the setting
    validated = snodo_cli("validate", "make answer() return 42", "--phase", "post_execute", cwd=project)
    assert validated.returncode == 3, validated
    assert "ModuleNotFoundError: No module named 'realproj_dep'" in " ".join(validated.stdout.split()), validated
    # the next step is the exact command again, the phase included
    assert "`snodo validate 'make answer() return 42' --phase post_execute`" in " ".join(validated.stdout.split())
    job = snodo_cli("jobs", "list", "--json", cwd=project).json()["jobs"][-1]["job_id"]
    shown_job = snodo_cli("jobs", "show", job, cwd=project)
    assert "ModuleNotFoundError: No module named 'realproj_dep'" in " ".join(shown_job.stdout.split()), shown_job
