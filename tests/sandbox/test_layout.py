"""Which paths a policy makes read-only, and how Landlock's grants are laid out around them."""

from __future__ import annotations

from pathlib import Path

import pytest

from snodo.errors import EnvironmentProblem
from snodo.sandbox import layout
from snodo.sandbox.layout import carve, read_only_paths


def _tree(root: Path, *files: str) -> Path:
    for f in files:
        (root / f).parent.mkdir(parents=True, exist_ok=True)
        (root / f).write_text("x")
    return root


def test_read_only_paths_expand_globs_case_insensitively_and_keep_the_outermost(tmp_path: Path) -> None:
    ws = _tree(
        tmp_path,
        ".snodo/protocol.yml",
        ".git/config",
        "Secrets/prod.key",
        "config/a/prod.yml",
        "config/b/c/prod.yml",
        "poetry.lock",
        "src/pkg/uv.lock",
        "src/app.py",
    )
    got = read_only_paths(ws, ("secrets", "config/**/prod.yml", "*.lock", "secrets/prod.key", "../etc", "missing"))
    assert sorted(p.relative_to(ws).as_posix() for p in got) == [
        ".git",
        ".snodo",
        "Secrets",
        "config/a/prod.yml",
        "config/b/c/prod.yml",
        "poetry.lock",
    ]


def test_too_many_protected_matches_is_a_clear_refusal(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(layout, "MAX_PROTECTED", 3)
    ws = _tree(tmp_path, *(f"data/f{i}.csv" for i in range(10)))
    with pytest.raises(EnvironmentProblem, match="protected paths"):
        read_only_paths(ws, ("data/*.csv",))


def test_carve_covers_everything_but_the_excluded_subtrees(tmp_path: Path) -> None:
    ws = _tree(tmp_path, ".snodo/p.yml", "src/secret/k", "src/secret2/k", "src/app.py", "README.md")
    (ws / "link").symlink_to(ws / ".snodo")
    got = {p.relative_to(ws).as_posix() for p in carve(ws, [ws / ".snodo", ws / "src" / "secret"])}
    assert got == {"src/secret2", "src/app.py", "README.md"}
    assert carve(ws, [tmp_path.parent / "elsewhere"]) == [ws]
    assert carve(ws, [ws]) == []
