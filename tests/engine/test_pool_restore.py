"""Restoring a reused working copy with git's own machinery (issues 27, 42): what the pool's
usual path (a directory walk for what git never lists, ``clean -ffdx`` and ``reset --hard``
against the index the last restore left) must still undo, and the engine's one-index-write
commit.

Real git repositories in tmp_path, the real pool (:func:`create_worktree`), real git."""

from __future__ import annotations

import os
import shutil
import stat
import time
from pathlib import Path

import pytest

from snodo.engine import change, pool, poolmodes
from snodo.engine.checkout import read_head
from snodo.engine.worktree import Worktree, create_worktree
from snodo.rules.guard import PathGuard
from snodo.workspace import gitmeta
from tests.conftest import git, make_repo

_MASK = os.umask(0o022)
os.umask(_MASK)
FILE_MODE = 0o666 & ~_MASK  # what a fresh checkout gives a file and a directory
DIR_MODE = 0o777 & ~_MASK


def _project(tmp_path: Path) -> Path:
    repo = make_repo(tmp_path / "repo")
    (repo / "pkg" / "sub").mkdir(parents=True)
    (repo / "pkg" / "sub" / "mod.py").write_text("x = 1\n")
    (repo / "pkg" / "keep.txt").write_text("keep\n")
    (repo / "README.md").write_text("# project\n")
    (repo / ".gitignore").write_text("build/\n")
    git(repo, "add", "-A")
    git(repo, "commit", "-qm", "project")
    return repo


def _again(repo: Path, home: Path, wt: Worktree, n: int) -> Worktree:
    wt.remove()
    again = create_worktree(repo, home, f"t{n}", f"run0000{n}")
    assert again.path == wt.path  # the same copy, reused
    return again


def _mode(path: Path) -> int:
    return stat.S_IMODE(os.lstat(path).st_mode)


def test_a_mode_change_is_undone_even_when_the_copys_index_was_refreshed(tmp_path: Path, snodo_home: Path) -> None:
    repo = _project(tmp_path)
    wt = create_worktree(repo, snodo_home, "t1", "run00001")
    # Right after the restore (within the same second as its index), then a refresh of the
    # copy's own index (as `git status` or a commit does): its stat data now matches.
    (wt.path / "README.md").chmod(0o444)
    (wt.path / "pkg" / "keep.txt").chmod(0o4644)
    (wt.path / "pkg" / "sub").chmod(0o700)
    git(wt.path, "update-index", "--refresh")
    again = _again(repo, snodo_home, wt, 2)
    try:
        assert _mode(again.path / "README.md") == FILE_MODE
        assert _mode(again.path / "pkg" / "keep.txt") == FILE_MODE
        assert _mode(again.path / "pkg" / "sub") == DIR_MODE
        assert (again.path / "README.md").read_text() == "# project\n"
    finally:
        again.remove()


def test_leftovers_git_cannot_see_or_that_hide_behind_a_link_are_gone(tmp_path: Path, snodo_home: Path) -> None:
    repo = _project(tmp_path)
    wt = create_worktree(repo, snodo_home, "t1", "run00001")
    # A tracked directory moved away and a link put in its place: through the link every
    # tracked file's stat data still matches.
    (wt.path / "pkg").rename(wt.path / "pkg.orig")
    (wt.path / "pkg").symlink_to("pkg.orig")
    os.mkfifo(wt.path / "fifo")
    (wt.path / "build").mkdir()
    (wt.path / "build" / "artefact.o").write_text("obj\n")
    (wt.path / "staged.txt").write_text("staged behind the tools' back\n")
    git(wt.path, "add", "staged.txt")
    (wt.path / "nested" / ".git").mkdir(parents=True)
    os.mkfifo(wt.path / "pkg.orig" / "sub" / "fifo")
    again = _again(repo, snodo_home, wt, 2)
    try:
        assert (again.path / "pkg").is_dir() and not (again.path / "pkg").is_symlink()
        assert (again.path / "pkg" / "sub" / "mod.py").read_text() == "x = 1\n"
        assert sorted(os.listdir(again.path / "pkg" / "sub")) == ["mod.py"]
        assert sorted(os.listdir(again.path / "pkg")) == ["keep.txt", "sub"]
        for gone in ("pkg.orig", "fifo", "build", "staged.txt", "nested"):
            assert not os.path.lexists(again.path / gone), gone
        assert git(again.path, "status", "--porcelain", "--ignored") == ""
    finally:
        again.remove()


def test_a_git_entry_planted_in_a_tracked_directory_is_gone(tmp_path: Path, snodo_home: Path) -> None:
    """git's own walks skip every entry named ``.git``, so ``clean -ffdx`` leaves one planted
    in a directory that holds tracked files (a file naming another git directory, or a
    repository whose configuration names a program): the restore's walk removes it."""
    repo = _project(tmp_path)
    wt = create_worktree(repo, snodo_home, "t1", "run00001")
    (wt.path / "pkg" / "sub" / ".git").write_text("gitdir: /elsewhere\n")
    (wt.path / "pkg" / ".git" / "hooks").mkdir(parents=True)
    (wt.path / "pkg" / ".git" / "config").write_text("[core]\n\tfsmonitor = /bin/false\n")
    os.mkfifo(wt.path / "pkg" / "sub" / "pipe")
    again = _again(repo, snodo_home, wt, 2)
    try:
        assert sorted(os.listdir(again.path / "pkg")) == ["keep.txt", "sub"]
        assert sorted(os.listdir(again.path / "pkg" / "sub")) == ["mod.py"]
        assert git(again.path, "status", "--porcelain", "--ignored") == ""
    finally:
        again.remove()


def test_a_copy_without_a_recorded_index_is_made_afresh(tmp_path: Path, snodo_home: Path) -> None:
    repo = _project(tmp_path)
    wt = create_worktree(repo, snodo_home, "t1", "run00001")
    gitdir = wt.slot.meta()["gitdir"] if wt.slot is not None else ""
    os.unlink(os.path.join(gitdir, pool.REF_INDEX))  # a copy from before the record existed
    (wt.path / "README.md").chmod(0o444)
    git(wt.path, "update-index", "--refresh")
    again = _again(repo, snodo_home, wt, 2)
    try:
        assert _mode(again.path / "README.md") == FILE_MODE
        assert os.path.isfile(os.path.join(gitdir, pool.REF_INDEX))  # recorded again
    finally:
        again.remove()


def test_the_engine_commit_holds_exactly_the_named_paths(tmp_path: Path, snodo_home: Path) -> None:
    repo = _project(tmp_path)
    wt = create_worktree(repo, snodo_home, "t1", "run00001")
    try:
        guard = PathGuard(wt.path, ())
        (wt.path / "hello.py").write_text("print('hello')\n")
        (wt.path / "README.md").write_text("# changed\n")
        (wt.path / "other.txt").write_text("staged behind the tools' back\n")
        git(wt.path, "add", "other.txt")
        made = change.commit_paths(wt.path, guard, ["hello.py", "README.md"], "first", base=wt.base)
        assert made is not None and made.files == ("README.md", "hello.py")
        assert git(wt.path, "rev-parse", "HEAD").strip() == made.commit
        assert git(wt.path, "rev-parse", "HEAD^{tree}").strip() == made.tree
        assert git(wt.path, "show", "--format=%B", "-s", "HEAD").strip() == "first"
        # The copy's index is the commit's: only the unstaged extra file shows.
        assert git(wt.path, "status", "--porcelain") == "?? other.txt\n"
        # A second commit builds on the first; one with no change makes none.
        (wt.path / "hello.py").write_text("print('hello again')\n")
        second = change.commit_paths(wt.path, guard, ["hello.py"], "second", base=wt.base)
        assert second is not None and second.files == ("README.md", "hello.py")
        assert git(wt.path, "rev-parse", "HEAD~1").strip() == made.commit
        assert change.commit_paths(wt.path, guard, ["hello.py"], "third", base=wt.base) is None
        assert git(wt.path, "rev-parse", "HEAD").strip() == second.commit
        (wt.path / "hello.py").unlink()
        third = change.commit_paths(wt.path, guard, ["hello.py"], "removed", base=wt.base)
        assert third is not None and third.files == ("README.md",)
    finally:
        wt.remove()


def test_the_engine_commits_on_top_of_a_coders_own_commit(tmp_path: Path, snodo_home: Path) -> None:
    """No index snodo wrote holds a coder's commit: the engine's index is read from its tree,
    and what the coder staged besides is not part of the engine's commit."""
    repo = _project(tmp_path)
    wt = create_worktree(repo, snodo_home, "t1", "run00001")
    try:
        guard = PathGuard(wt.path, ())
        (wt.path / "own.py").write_text("own\n")
        git(wt.path, "add", "own.py")
        git(wt.path, "-c", "user.name=a", "-c", "user.email=a@b", "commit", "-qm", "coder's own")
        own = git(wt.path, "rev-parse", "HEAD").strip()
        assert change.commit_paths(wt.path, guard, ["own.py"], "nothing new", base=wt.base) is None
        (wt.path / "staged.txt").write_text("staged behind the tools' back\n")
        git(wt.path, "add", "staged.txt")
        (wt.path / "README.md").write_text("# changed\n")
        made = change.commit_paths(wt.path, guard, ["README.md"], "on top", base=wt.base)
        assert made is not None and made.files == ("README.md", "own.py")
        assert git(wt.path, "rev-parse", "HEAD~1").strip() == own
        assert git(wt.path, "rev-parse", "HEAD^{tree}").strip() == made.tree
        assert git(wt.path, "ls-tree", "--name-only", "HEAD").split().count("staged.txt") == 0
    finally:
        wt.remove()


def test_what_a_run_committed_or_staged_is_gone_and_the_record_stays_private(tmp_path: Path, snodo_home: Path) -> None:
    """A run that added, staged and committed files (its HEAD and index moved) is undone:
    the copy is back at the base with nothing else in it, and a refresh of the copy's own
    index (``git status`` or a commit does one) does not hide a change from the restore,
    which compares with the index it recorded itself."""
    repo = _project(tmp_path)
    base = git(repo, "rev-parse", "HEAD").strip()
    wt = create_worktree(repo, snodo_home, "t1", "run00001")
    gitdir = wt.slot.meta()["gitdir"] if wt.slot is not None else ""
    (wt.path / "pkg" / "new.py").write_text("new\n")
    (wt.path / "README.md").write_text("# changed\n")  # the same size as "# project\n"
    git(wt.path, "add", "pkg/new.py", "README.md")
    git(wt.path, "-c", "user.name=a", "-c", "user.email=a@b", "commit", "-qm", "work")
    (wt.path / "pkg" / "staged.txt").write_text("staged\n")
    git(wt.path, "add", "pkg/staged.txt")
    (wt.path / "pkg" / "keep.txt").write_text("kept?\n")
    time.sleep(1.1)  # past the record's second: only the stat data can tell
    (wt.path / "pkg" / "sub" / "mod.py").chmod(0o444)
    git(wt.path, "update-index", "-q", "--refresh")  # the copy's own index now holds its stat data
    again = _again(repo, snodo_home, wt, 2)
    try:
        assert pool.detached_head(gitdir) == base == git(again.path, "rev-parse", "HEAD").strip()
        assert git(again.path, "status", "--porcelain", "--ignored") == ""
        assert not (again.path / "pkg" / "new.py").exists() and not (again.path / "pkg" / "staged.txt").exists()
        assert (again.path / "README.md").read_text() == "# project\n"
        assert (again.path / "pkg" / "keep.txt").read_text() == "keep\n"
        assert _mode(again.path / "pkg" / "sub" / "mod.py") == FILE_MODE
        assert not os.path.exists(os.path.join(gitdir, "ORIG_HEAD"))
        assert not os.path.exists(os.path.join(gitdir, "logs", "HEAD"))
    finally:
        again.remove()


@pytest.mark.parametrize("later", [False, True], ids=["in-the-records-second", "a-second-later"])
def test_a_same_size_rewrite_with_its_mtime_set_back_is_undone(tmp_path: Path, snodo_home: Path, later: bool) -> None:
    """Racy git: a tracked file rewritten to the same size and given its old mtime back,
    within the second the restore's record was written (git compares such an entry by
    content) or later (its ctime, which no process sets, differs). The next restore writes
    it again from the object store; so does every restore after it."""
    repo = _project(tmp_path)
    wt = create_worktree(repo, snodo_home, "t1", "run00001")
    wt = _again(repo, snodo_home, wt, 2)  # a restored copy (not the fresh checkout's record)
    if later:
        time.sleep(1.1)
    readme = wt.path / "README.md"
    before = os.stat(readme)
    readme.write_text("# HACKED!\n")  # the same size as "# project\n"
    os.utime(readme, ns=(before.st_atime_ns, before.st_mtime_ns))
    assert os.stat(readme).st_size == before.st_size and os.stat(readme).st_mtime_ns == before.st_mtime_ns
    again = _again(repo, snodo_home, wt, 3)
    try:
        assert readme.read_text() == "# project\n"
        assert git(again.path, "status", "--porcelain", "--ignored") == ""
    finally:
        again.remove()
    time.sleep(1.1)  # and once the record is no longer racy
    last = create_worktree(repo, snodo_home, "t4", "run00004")
    try:
        before = os.stat(readme)
        readme.write_text("# HACKED!\n")
        os.utime(readme, ns=(before.st_atime_ns, before.st_mtime_ns))
    finally:
        last.remove()
    final = create_worktree(repo, snodo_home, "t5", "run00005")
    try:
        assert final.path == last.path and readme.read_text() == "# project\n"
    finally:
        final.remove()


def test_the_base_is_read_from_the_checkouts_refs_or_from_its_status(tmp_path: Path, snodo_home: Path) -> None:
    """HEAD from the user's git directory when it is a loose branch ref or a detached commit;
    a packed ref is left to the ``status`` (the base is the same either way)."""
    repo = _project(tmp_path)
    head = git(repo, "rev-parse", "HEAD").strip()
    assert read_head(repo) == head
    git(repo, "pack-refs", "--all")
    assert not (repo / ".git" / "refs" / "heads" / "main").exists()
    assert read_head(repo) is None
    (repo / "dirty.txt").write_text("mine\n")
    wt = create_worktree(repo, snodo_home, "t1", "run00001")
    try:
        assert wt.base == head and pool.detached_head(wt.slot.meta()["gitdir"] if wt.slot else "") == head
        assert wt.left_out == ("dirty.txt",)
    finally:
        wt.remove()
    git(repo, "checkout", "-q", "--detach", "HEAD")
    assert read_head(repo) == head


def _reading(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The directories the restore's walk reads (the racy window closed, so that a directory
    is skipped exactly when its inode, mtime and ctime are as the last walk saw them)."""
    monkeypatch.setattr(gitmeta, "_RACY_NS", 0)
    read: list[str] = []
    original = poolmodes._repaired_entries

    def counting(here: str, top: str, modes: int | None) -> list[os.DirEntry[str]]:
        read.append(os.path.relpath(here, top))
        return original(here, top, modes)

    monkeypatch.setattr(poolmodes, "_repaired_entries", counting)
    return read


def test_a_restore_reads_only_what_changed_and_still_undoes_it(
    tmp_path: Path, snodo_home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The walk for what git cannot see reads a directory again only when it changed since
    the last restore's walk; what a run leaves deep in an otherwise unchanged tree (a fifo,
    a ``.git``, a ``chmod 000`` directory) is still found and undone."""
    repo = _project(tmp_path)
    (repo / "pkg" / "sub" / "deep").mkdir()
    (repo / "pkg" / "sub" / "deep" / "leaf.txt").write_text("leaf\n")
    git(repo, "add", "-A")
    git(repo, "commit", "-qm", "deeper")
    read = _reading(monkeypatch)
    wt = create_worktree(repo, snodo_home, "t1", "run00001")
    time.sleep(1.1)  # past the checkout's second (a directory changed in the index's second is read)
    wt = _again(repo, snodo_home, wt, 2)
    assert sorted(read) == [".", "pkg", "pkg/sub", "pkg/sub/deep"]  # no walk kept yet: all of it
    read.clear()
    wt = _again(repo, snodo_home, wt, 3)
    assert read == []  # nothing changed since
    os.mkfifo(wt.path / "pkg" / "sub" / "deep" / "pipe")
    (wt.path / "pkg" / "sub" / ".git").write_text("gitdir: /elsewhere\n")
    (wt.path / "pkg" / "sub" / "deep").chmod(0o000)
    again = _again(repo, snodo_home, wt, 4)
    try:
        assert sorted(read) == ["pkg/sub", "pkg/sub/deep"]
        assert _mode(again.path / "pkg" / "sub" / "deep") == DIR_MODE
        assert sorted(os.listdir(again.path / "pkg" / "sub")) == ["deep", "mod.py"]
        assert os.listdir(again.path / "pkg" / "sub" / "deep") == ["leaf.txt"]
        assert git(again.path, "status", "--porcelain", "--ignored") == ""
    finally:
        again.remove()


@pytest.mark.parametrize("record", ["garbage", "another-root", "missing"])
def test_a_kept_walk_that_does_not_fit_means_reading_everything(
    tmp_path: Path, snodo_home: Path, monkeypatch: pytest.MonkeyPatch, record: str
) -> None:
    repo = _project(tmp_path)
    read = _reading(monkeypatch)
    wt = _again(repo, snodo_home, create_worktree(repo, snodo_home, "t1", "run00001"), 2)
    kept = Path(wt.slot.meta()["gitdir"] if wt.slot is not None else "") / pool.REF_DIRS
    if record == "garbage":
        kept.write_text('{"version": 1, "root": 3, "dirs": [[1, 2]]}')
    elif record == "another-root":
        kept.write_text(kept.read_text().replace(str(wt.path), str(wt.path) + "-elsewhere"))
    else:
        kept.unlink()
    os.mkfifo(wt.path / "pkg" / "sub" / "pipe")
    read.clear()
    again = _again(repo, snodo_home, wt, 3)
    try:
        assert sorted(read) == [".", "pkg", "pkg/sub"]
        assert os.listdir(again.path / "pkg" / "sub") == ["mod.py"]
        assert kept.is_file()  # written again
    finally:
        again.remove()


def test_with_a_kept_walk_clean_looks_only_where_something_is_new_and_misses_nothing(
    tmp_path: Path, snodo_home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """With the last walk kept, ``clean`` is given only the paths an untracked entry can be
    at (every entry of a changed directory, a new directory whole); what a run leaves in
    every kind of place is still gone: a new tree, an empty new directory, a file deep in an
    otherwise unchanged tracked tree, an ignored file, a link where a tracked directory was, a
    file where one was, a file staged behind the tools' back."""
    repo = _project(tmp_path)
    for leaf in ("deep/a/b/c/leaf.txt", "deep/q/r/leaf.txt", "deep/z/leaf.txt", "deep/still/leaf.txt"):
        (repo / leaf).parent.mkdir(parents=True, exist_ok=True)
        (repo / leaf).write_text("leaf\n")
    git(repo, "add", "-A")
    git(repo, "commit", "-qm", "deeper")
    _reading(monkeypatch)
    cleans: list[tuple[str, ...]] = []
    real_run_git = pool.run_git

    def recording(repo: Path, *args: str, **kw: object) -> object:
        if "clean" in args:
            cleans.append(args[args.index("clean") :])
        return real_run_git(repo, *args, **kw)  # type: ignore[arg-type]

    monkeypatch.setattr(pool, "run_git", recording)
    wt = create_worktree(repo, snodo_home, "t1", "run00001")
    time.sleep(1.1)  # past the checkout's second
    wt = _again(repo, snodo_home, wt, 2)
    (wt.path / "pkg").rename(wt.path / "pkg.orig")
    (wt.path / "pkg").symlink_to("pkg.orig")
    (wt.path / "new" / "tree").mkdir(parents=True)
    (wt.path / "new" / "tree" / "x.py").write_text("x\n")
    (wt.path / "deep" / "a" / "b" / "empty").mkdir()
    (wt.path / "deep" / "a" / "b" / "c" / "untracked.py").write_text("u\n")
    (wt.path / "deep" / "z" / "build").mkdir()
    (wt.path / "build").mkdir()
    (wt.path / "build" / "artefact.o").write_text("obj\n")
    shutil.rmtree(wt.path / "deep" / "q" / "r")
    (wt.path / "deep" / "q" / "r").write_text("a file where a directory was\n")
    (wt.path / "staged.txt").write_text("staged\n")
    git(wt.path, "add", "staged.txt")
    cleans.clear()
    again = _again(repo, snodo_home, wt, 3)
    try:
        assert len(cleans) == 1 and "--" in cleans[0]  # the scoped clean ran
        assert "deep/z/build" in cleans[0] and not any(p.startswith("deep/still") for p in cleans[0])
        assert git(again.path, "status", "--porcelain", "--ignored") == ""
        assert sorted(os.listdir(again.path)) == [".git", ".gitignore", "README.md", "deep", "pkg"]
        assert sorted(os.listdir(again.path / "deep")) == ["a", "q", "still", "z"]
        assert sorted(os.listdir(again.path / "deep" / "a" / "b")) == ["c"]
        assert os.listdir(again.path / "deep" / "a" / "b" / "c") == ["leaf.txt"]
        assert os.listdir(again.path / "deep" / "z") == ["leaf.txt"]
        assert (again.path / "deep" / "q" / "r" / "leaf.txt").read_text() == "leaf\n"
        assert (again.path / "pkg").is_dir() and not (again.path / "pkg").is_symlink()
        (again.path / "new" / "tree").mkdir(parents=True)  # where the last restore removed one
        (again.path / "new" / "tree" / "x.py").write_text("x\n")
        again = _again(repo, snodo_home, again, 4)
        assert "new" not in os.listdir(again.path)
        time.sleep(1.1)  # past the second of the last clean and reset
        again = _again(repo, snodo_home, again, 5)  # reads what they changed
        cleans.clear()
        again = _again(repo, snodo_home, again, 6)
        assert cleans == []  # nothing changed since: nothing to clean
    finally:
        again.remove()
