"""The wheel ships every package of the source tree: `[tool.setuptools] packages` is a list
written by hand, and a package left out of it (``snodo.evidence`` once was) breaks every
non-editable install at start-up while the editable one used by the tests works."""

from __future__ import annotations

import tomllib
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent


def test_every_source_directory_with_python_modules_is_a_listed_package() -> None:
    setuptools = tomllib.loads((REPO / "pyproject.toml").read_text())["tool"]["setuptools"]
    listed = set(setuptools["packages"])
    expected = set()
    for name, directory in setuptools["package-dir"].items():
        root = REPO / directory
        for module in root.rglob("*.py"):
            if "__pycache__" in module.parts:
                continue
            relative = module.parent.relative_to(root)
            expected.add(".".join((name, *relative.parts)))
    assert expected - listed == set(), "add these to [tool.setuptools] packages in pyproject.toml"
    assert listed - expected == set(), "these listed packages have no modules"


PROJECT = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]

#: Where a person or a CI reads how to install snodo.
INSTALL_TEXTS = ("README.md", "docs", "examples", "action.yml", "scripts", ".pre-commit-hooks.yaml", "snodo/cli")


def _names(requirements: list[str]) -> set[str]:
    from packaging.requirements import Requirement

    return {Requirement(r).name for r in requirements}


def test_the_distribution_has_its_own_name_and_a_plain_version() -> None:
    """The package index's ``snodo`` is an unrelated project: ours is snodo-governance, with a
    version that needs no epoch to outrank theirs."""
    import snodo

    assert PROJECT["name"] == snodo.DISTRIBUTION == "snodo-governance"
    assert "!" not in PROJECT["version"]
    assert PROJECT["scripts"] == {"snodo": "snodo.cli.main:main"}  # the command keeps its name


def test_the_base_install_leaves_the_model_stack_to_an_extra() -> None:
    extras = PROJECT["optional-dependencies"]
    assert "litellm" not in _names(PROJECT["dependencies"])
    assert _names(extras["model"]) == {"litellm"}
    assert extras["all"] == ["snodo-governance[model]"]
    # the suite drives the litellm coder against a local server: `.ci/run` installs `.[test]`
    assert "snodo-governance[model]" in extras["test"]
    assert not [r for extra in extras.values() for r in extra if r.startswith("snodo[") or r.startswith("snodo ")]


def test_every_install_instruction_names_our_distribution() -> None:
    """`pip install snodo` would install the unrelated project: every README, doc, example,
    recipe and generated template says snodo-governance (or a path to a checkout)."""
    import re

    wrong = re.compile(r"(pip|pipx|uv tool|uv pip) install\s+(-U\s+)?['\"]?snodo(?![-\w/.])")
    needs_ours = re.compile(r"(pip|pipx|uv tool|uv pip) install\s+(-U\s+)?['\"]?snodo-governance\b")
    found, ours = [], 0
    for name in INSTALL_TEXTS:
        root = REPO / name
        files = [root] if root.is_file() else sorted(p for p in root.rglob("*") if p.is_file()) if root.is_dir() else []
        for path in files:
            if (
                path.suffix not in (".md", ".py", ".yml", ".yaml", ".sh", ".toml", ".ini", ".tmpl", "")
                or "__pycache__" in path.parts
            ):
                continue
            text = path.read_text(encoding="utf-8", errors="replace")
            ours += len(needs_ours.findall(text))
            found += [f"{path.relative_to(REPO)}: {m.group(0)}" for m in wrong.finditer(text)]
    assert found == []
    assert ours >= 3  # the README, docs/ci.md and the plugin template at least say it
