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
