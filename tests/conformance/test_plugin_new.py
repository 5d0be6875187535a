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
    assert "pip install -e '.[test]'          # this package and snodo-governance" in (root / "README.md").read_text()
    assert "source = {env:SNODO_SOURCE:snodo-governance>=" in tox


def test_nothing_generated_names_a_path_of_this_machine(tmp_path: Path) -> None:
    """A team commits the package: the checkout that generated it, the directory it was
    written to and this interpreter are nowhere in it; the command says where snodo is instead."""
    import snodo

    code, output = _new(tmp_path, "validator", "portable")
    assert code == 0, output
    here = [str(tmp_path), str(Path(snodo.__file__).resolve().parents[1]), sys.prefix, str(Path.home())]
    for path in (tmp_path / "snodo-portable").rglob("*"):
        if path.is_file():
            text = path.read_text()
            assert [p for p in here if p in text] == [], path
    checkout = str(Path(snodo.__file__).resolve().parents[1])
    assert f"SNODO_SOURCE={checkout} tox" in " ".join(output.split()), output  # said, for this machine only


def test_the_pin_names_our_distribution_with_a_plain_version() -> None:
    from packaging.requirements import Requirement

    from snodo import DISTRIBUTION, __version__

    req = Requirement(SNODO_PIN)
    assert req.name == DISTRIBUTION == "snodo-governance"
    assert "!" not in SNODO_PIN  # no epoch: under its own name there is nothing to outrank
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
