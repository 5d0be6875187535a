"""The `.git` watch reads only directories that changed since its last walk (#27: cost
follows the change), and still sees every new `.git` however it got there.

The 2 s "racy" window (a directory changed that recently is always read again) is set to
zero here, so the incremental path itself is what is tested: a directory is skipped only
when its inode, mtime and ctime are unchanged.
"""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest

from snodo.engine.poolmodes import repair
from snodo.git.runner import pin
from snodo.workspace import gitmeta
from snodo.workspace.gitmeta import GitMetaWatch, git_entries
from tests.conftest import git, make_repo


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

    def counting(here: str, key: tuple[int, int, int], now: int) -> gitmeta.DirScan:
        read.append(here)
        return original(here, key, now)

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
    walked = repair(tree, {}, int(time.time()) + 10)
    assert walked is not None
    gitmeta.remember_walk(tree, walked)
    read = _reads(monkeypatch)
    watch = GitMetaWatch(tree)
    assert read == []  # nothing read: the walk said it all
    (tree / "e" / ".git").mkdir()
    assert [path for path, _ in watch.intruders()] == ["e/.git"]


def test_an_unchanged_index_is_not_read_again_and_a_gitlink_staged_since_is_found(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The look at the index that saves a ``git ls-files``: an index file unchanged since
    it was found free of gitlinks is not opened again; one git rewrote is read, and a
    gitlink staged in it is unstaged and reported."""
    repo = make_repo(tmp_path / "repo")
    pin(repo)
    watch = GitMetaWatch(repo)
    opened: list[str] = []
    real_listdir = os.listdir

    def counting_listdir(path: object) -> list[str]:
        opened.append(str(path))
        return real_listdir(path)  # type: ignore[arg-type]

    monkeypatch.setattr(gitmeta.os, "listdir", counting_listdir)
    assert watch.intruders() == [] and GitMetaWatch(repo).links == set()
    assert opened == []  # the same index file: neither the git directory nor the index read
    head = git(repo, "rev-parse", "HEAD").strip()
    git(repo, "update-index", "--add", "--cacheinfo", f"160000,{head},vendor")
    assert watch.intruders() == [("vendor", gitmeta.REASON_NEW_GITLINK)]
    assert opened  # the index changed: read again
    assert "vendor" not in git(repo, "ls-files", "--stage")


def test_a_gitlink_in_the_shared_part_of_a_split_index_is_seen(tmp_path: Path) -> None:
    """A split index holds most entries in a ``sharedindex.*`` file beside it (as the pool's
    copies' indexes do): a gitlink there is found, and one staged since in the split part too."""
    repo = make_repo(tmp_path / "repo")
    pin(repo)
    head = git(repo, "rev-parse", "HEAD").strip()
    git(repo, "update-index", "--add", "--cacheinfo", f"160000,{head},vendor")
    git(repo, "-c", "core.splitIndex=true", "update-index", "--split-index")
    assert list((repo / ".git").glob("sharedindex.*"))
    watch = GitMetaWatch(repo)
    assert watch.links == {"vendor"}
    git(repo, "-c", "core.splitIndex=true", "update-index", "--add", "--cacheinfo", f"160000,{head},third_party")
    assert watch.intruders() == [("third_party", gitmeta.REASON_NEW_GITLINK)]


def test_a_throwaway_copy_s_scan_is_not_kept(tmp_path: Path) -> None:
    """A validator's private copy is looked at once, then removed: a long `snodo serve`
    keeps no scan of each one it ever judged."""
    copy = tmp_path / "copy"
    (copy / "pkg" / "sub").mkdir(parents=True)
    watch = gitmeta.GitMetaWatch(copy, throwaway=True)
    (copy / "pkg" / "sub" / ".git").mkdir()
    assert watch.intruders() == [("pkg/sub/.git", gitmeta.REASON_NEW_GIT)]
    assert not (copy / "pkg" / "sub" / ".git").exists()
    assert Path(os.path.realpath(copy)) not in gitmeta._SCANS
