"""Which paths a policy makes read-only, and how Landlock's grants are laid out around them."""

from __future__ import annotations

import os
import threading
from pathlib import Path

import pytest

from snodo.base.errors import EnvironmentProblem
from snodo.sandbox import layout
from snodo.sandbox.layout import carve, protected_parents, read_only_paths
from tests.conftest import git


def _tree(root: Path, *files: str) -> Path:
    for f in files:
        (root / f).parent.mkdir(parents=True, exist_ok=True)
        (root / f).write_text("x")
    return root


def _repo(root: Path, *files: str, untracked: tuple[str, ...] = ()) -> Path:
    """A git work tree with ``files`` committed and ``untracked`` left as they are."""
    root.mkdir(parents=True, exist_ok=True)
    git(root, "init", "-q")
    _tree(root, *files)
    git(root, "add", "-A")
    git(root, "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "base")
    _tree(root, *untracked)
    return root


def test_read_only_paths_expand_globs_case_insensitively_and_keep_the_outermost(tmp_path: Path) -> None:
    ws = _repo(
        tmp_path / "ws",
        ".snodo/protocol.yml",
        "config/a/prod.yml",
        "src/pkg/uv.lock",
        "src/app.py",
        untracked=("Secrets/prod.key", "config/b/c/prod.yml", "poetry.lock"),  # untracked ones count too
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
    ws = _repo(tmp_path / "ws", *(f"data/f{i}.csv" for i in range(10)))
    with pytest.raises(EnvironmentProblem, match="match 10 separate paths, which need 11 read-only mounts"):
        read_only_paths(ws, ("data/*.csv",))
    # The bound is on matches, never on the size of the repository: a directory is one path.
    assert [p.name for p in read_only_paths(ws, ("DATA",))] == [".git", "data"]


def test_whole_directories_are_bound_once_and_ignored_files_are_found(tmp_path: Path) -> None:
    ws = _repo(
        tmp_path / "ws",
        ".gitignore",
        "a/secrets/one.txt",
        "a/b/Secrets/two.txt",
        "app/uv.lock",
        "app/main.py",
        "app/sub/deep.LOCK",
        untracked=("build/secrets/generated.key",),
    )
    (ws / ".gitignore").write_text("build/\n")
    got = read_only_paths(ws, ("**/secrets/**", "**/*.lock"))
    assert sorted(p.relative_to(ws).as_posix() for p in got) == [
        ".git",
        "a/b/Secrets",
        "a/secrets",
        "app/sub/deep.LOCK",
        "app/uv.lock",
        "build/secrets",
    ]
    parents = protected_parents(ws, got)
    assert sorted(p.relative_to(ws).as_posix() for p in parents) == ["a", "a/b", "app", "app/sub", "build"]


def test_a_workspace_git_cannot_list_is_refused_not_left_unprotected(tmp_path: Path) -> None:
    ws = _tree(tmp_path / "plain", "secrets/k")
    assert read_only_paths(ws, ()) == ()  # nothing to find: no git needed
    with pytest.raises(EnvironmentProblem, match="found through git"):
        read_only_paths(ws, ("secrets",))


def test_carve_covers_everything_but_the_excluded_subtrees(tmp_path: Path) -> None:
    ws = _tree(tmp_path, ".snodo/p.yml", "src/secret/k", "src/secret2/k", "src/app.py", "README.md")
    (ws / "link").symlink_to(ws / ".snodo")
    got = {p.relative_to(ws).as_posix() for p in carve(ws, [ws / ".snodo", ws / "src" / "secret"])}
    assert got == {"src/secret2", "src/app.py", "README.md"}
    assert carve(ws, [tmp_path.parent / "elsewhere"]) == [ws]
    assert carve(ws, [ws]) == []


def test_a_fifo_named_git_is_never_read(tmp_path: Path) -> None:
    """A confined process may leave a FIFO named ``.git`` in a workspace that has none:
    finding the workspace's git directory must not block on it."""
    os.mkfifo(tmp_path / ".git")
    found: list[object] = []
    reader = threading.Thread(target=lambda: found.append(layout.linked_git_dir(tmp_path)), daemon=True)
    reader.start()
    reader.join(10)
    assert found == [None]
