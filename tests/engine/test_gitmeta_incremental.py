"""The `.git` watch reads only directories that changed since its last walk (#27: cost
follows the change), and still sees every new `.git` however it got there.

The 2 s "racy" window (a directory changed that recently is always read again) is set to
zero here, so the incremental path itself is what is tested: a directory is skipped only
when its inode, mtime and ctime are unchanged.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from snodo.engine.pool import repair_modes
from snodo.workspace import gitmeta
from snodo.workspace.gitmeta import GitMetaWatch, git_entries


@pytest.fixture
def tree(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setattr(gitmeta, "_RACY_NS", 0)
    root = tmp_path / "ws"
    for d in ("a/b/c", "a/d", "e"):
        (root / d).mkdir(parents=True)
        (root / d / "f.txt").write_text("x\n")
    return root


def _reads(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    read: list[str] = []
    original = gitmeta._read_dir

    def counting(here: str, key: tuple[int, int, int]) -> gitmeta._Dir:
        read.append(here)
        return original(here, key)

    monkeypatch.setattr(gitmeta, "_read_dir", counting)
    return read


def test_an_unchanged_tree_is_not_read_again(tree: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    assert git_entries(tree) == set()
    read = _reads(monkeypatch)
    assert git_entries(tree) == set()
    assert read == []
    (tree / "a" / "b" / "new.txt").write_text("y\n")
    assert git_entries(tree) == set()
    assert read == [str(tree / "a" / "b")]  # only the directory that changed


def test_a_new_git_deep_in_an_unchanged_tree_is_found_and_removed(tree: Path) -> None:
    watch = GitMetaWatch(tree)
    (tree / "a" / "b" / "c" / ".git").mkdir()
    (tree / "e" / ".GIT").write_text("gitdir: /elsewhere\n")
    found = dict(watch.intruders())
    assert set(found) == {"a/b/c/.git", "e/.GIT"}
    assert not (tree / "a" / "b" / "c" / ".git").exists()


def test_a_directory_moved_in_with_a_git_inside_is_found(tree: Path, tmp_path: Path) -> None:
    outside = tmp_path / "outside" / "pkg"
    (outside / "deep" / ".git").mkdir(parents=True)
    watch = GitMetaWatch(tree)
    os.rename(outside, tree / "a" / "d" / "pkg")
    assert [path for path, _ in watch.intruders()] == ["a/d/pkg/deep/.git"]


def test_the_pool_walk_serves_as_the_first_scan(tree: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    walked: dict[str, object] = {}
    assert repair_modes(tree, walked=walked) == 0  # type: ignore[arg-type]
    gitmeta.remember_walk(tree, walked)  # type: ignore[arg-type]
    read = _reads(monkeypatch)
    watch = GitMetaWatch(tree)
    assert read == []  # nothing read: the walk said it all
    (tree / "e" / ".git").mkdir()
    assert [path for path, _ in watch.intruders()] == ["e/.git"]
