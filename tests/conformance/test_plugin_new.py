"""``snodo plugin new``: a package that installs in a fresh venv and passes the kit and its own tests."""

from __future__ import annotations

import os
import subprocess
import sys
import sysconfig
from pathlib import Path

import pytest
from click.testing import CliRunner

from snodo.cli.main import cli
from snodo.cli.plugin_cmd import SNODO_PIN


def _new(tmp_path: Path, *args: str) -> tuple[int, str]:
    result = CliRunner().invoke(cli, ["plugin", "new", *args, "--dir", str(tmp_path)])
    return result.exit_code, result.output + ("" if result.exception is None else str(result.exception))


def test_it_writes_a_complete_package(tmp_path: Path) -> None:
    code, output = _new(tmp_path, "coder", "my-coder")
    assert code == 0, output
    root = tmp_path / "snodo-my-coder"
    files = sorted(p.relative_to(root).as_posix() for p in root.rglob("*") if p.is_file())
    assert files == [
        "README.md",
        "conftest.py",
        "pyproject.toml",
        "src/snodo_my_coder/__init__.py",
        "src/snodo_my_coder/py.typed",
        "tests/test_snodo_my_coder.py",
        "tox.ini",
    ]
    pyproject = (root / "pyproject.toml").read_text()
    assert f'dependencies = ["{SNODO_PIN}"]' in pyproject
    assert '[project.entry-points.snodo]\nmy-coder = "snodo_my_coder"' in pyproject
    tox = (root / "tox.ini").read_text()
    assert "[testenv:conformance]" in tox and "--snodo-coder my-coder" in tox
    assert "pip install /path/to/snodo" in (root / "README.md").read_text()


def test_the_pin_cannot_resolve_to_the_unrelated_index_distribution() -> None:
    """The index's ``snodo`` has plain versions (0.x today); an epoch-1 minimum is above all of them."""
    from packaging.requirements import Requirement

    req = Requirement(SNODO_PIN)
    for theirs in ("0.26.0", "0.99.0", "1.0.0", "99.0", "2026.11.30"):
        assert not req.specifier.contains(theirs), theirs
    from snodo import __version__

    assert req.specifier.contains(__version__)


@pytest.mark.parametrize(
    ("args", "message"), [(("coder", "Bad_Name"), "not a usable coder name"), (("validator", "-x"), "")]
)
def test_bad_names_are_refused(tmp_path: Path, args: tuple[str, ...], message: str) -> None:
    code, output = _new(tmp_path, *args)
    assert code != 0
    assert message in output
    assert not any(tmp_path.iterdir())


def test_an_existing_directory_is_not_overwritten(tmp_path: Path) -> None:
    (tmp_path / "snodo-x").mkdir()
    code, _ = _new(tmp_path, "validator", "x")
    assert code != 0
    assert not any((tmp_path / "snodo-x").iterdir())


def _run(argv: list[str], cwd: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "LITELLM_LOCAL_MODEL_COST_MAP": "True"}
    return subprocess.run(argv, cwd=cwd, env=env, capture_output=True, text=True, timeout=600, check=False)


@pytest.mark.slow
@pytest.mark.parametrize("kind", ["coder", "validator"])
def test_a_generated_plugin_installs_and_passes_the_kit(tmp_path: Path, kind: str) -> None:
    """Generated, installed (``--no-deps``) into a fresh venv that sees this snodo, it passes
    the kit from an empty directory and its own end-to-end tests."""
    code, output = _new(tmp_path, kind, "fresh")
    assert code == 0, output
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True, timeout=300)
    python = venv / "bin" / "python"
    new_site = _run([str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"], tmp_path)
    # the fresh venv sees this venv's packages (snodo included) the way --system-site-packages would
    Path(new_site.stdout.strip(), "_snodo_under_test.pth").write_text(
        f"import site; site.addsitedir({sysconfig.get_paths()['purelib']!r})\n"
    )
    installed = _run([str(python), "-m", "pip", "install", "-q", "--no-deps", str(tmp_path / "snodo-fresh")], tmp_path)
    assert installed.returncode == 0, installed.stderr
    empty = tmp_path / "empty"
    empty.mkdir()
    (empty / "pytest.ini").write_text("[pytest]\n")
    report = tmp_path / "report.json"
    kit = _run(
        [str(python), "-m", "pytest", "-p", "snodo_conformance.plugin", "-p", "no:cacheprovider", "-rs",
         f"--snodo-{kind}", "fresh", f"--snodo-report={report}"],
        empty,
    )  # fmt: skip
    assert kit.returncode == 0, kit.stdout + kit.stderr
    assert " failed" not in kit.stdout and " error" not in kit.stdout
    own = _run([str(python), "-m", "pytest", "-q", "-p", "no:cacheprovider"], tmp_path / "snodo-fresh")
    assert own.returncode == 0, own.stdout + own.stderr
