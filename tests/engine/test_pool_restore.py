"""Restoring a reused working copy without reading every file (issue 27): what the pool's
usual path (a directory walk, ``reset --hard`` against the index the last restore left, one
``clean``) must still undo, and the engine's one-index-write commit.

Real git repositories in tmp_path, the real pool (:func:`create_worktree`), real git."""

from __future__ import annotations

import os
import stat
import subprocess
import time
from pathlib import Path

import pytest

from snodo.engine import change, pool, poolscan
from snodo.engine.checkout import read_head
from snodo.engine.worktree import Worktree, create_worktree
from snodo.rules.guard import PathGuard
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


@pytest.mark.parametrize("recorded", [True, False], ids=["recorded-names", "no-record-then-clean"])
def test_leftovers_git_cannot_see_or_that_hide_behind_a_link_are_gone(
    tmp_path: Path, snodo_home: Path, recorded: bool
) -> None:
    repo = _project(tmp_path)
    wt = create_worktree(repo, snodo_home, "t1", "run00001")
    if not recorded:  # a copy from before the record of names: every directory read, then `clean`
        os.unlink(os.path.join(wt.slot.meta()["gitdir"] if wt.slot is not None else "", poolscan.RECORD))
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
    again = _again(repo, snodo_home, wt, 2)
    try:
        assert (again.path / "pkg").is_dir() and not (again.path / "pkg").is_symlink()
        assert (again.path / "pkg" / "sub" / "mod.py").read_text() == "x = 1\n"
        for gone in ("pkg.orig", "fifo", "build", "staged.txt", "nested"):
            assert not os.path.lexists(again.path / gone), gone
        assert git(again.path, "status", "--porcelain", "--ignored") == ""
    finally:
        again.remove()


def test_a_copy_without_a_recorded_index_takes_the_long_path(tmp_path: Path, snodo_home: Path) -> None:
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


def test_a_copy_whose_tracked_files_are_untouched_is_not_reset(tmp_path: Path, snodo_home: Path) -> None:
    """The restore's read-only check: a copy where a run only added files, staged and
    committed (its HEAD and index moved, no tracked file of the base changed) is brought
    back without ``reset --hard`` (the recorded index is not rewritten); one tracked file
    changed, even to the same size, and the reset runs."""
    repo = _project(tmp_path)
    base = git(repo, "rev-parse", "HEAD").strip()
    wt = create_worktree(repo, snodo_home, "t1", "run00001")
    gitdir = wt.slot.meta()["gitdir"] if wt.slot is not None else ""
    time.sleep(1.1)  # past the second the checkout wrote in: no entry of the record is racy
    wt = _again(repo, snodo_home, wt, 2)
    (wt.path / "pkg" / "new.py").write_text("new\n")
    git(wt.path, "add", "pkg/new.py")
    git(wt.path, "-c", "user.name=a", "-c", "user.email=a@b", "commit", "-qm", "work")
    (wt.path / "pkg" / "staged.txt").write_text("staged\n")
    git(wt.path, "add", "pkg/staged.txt")
    recorded = os.stat(os.path.join(gitdir, pool.REF_INDEX)).st_ino
    again = _again(repo, snodo_home, wt, 3)
    try:
        assert os.stat(os.path.join(gitdir, pool.REF_INDEX)).st_ino == recorded  # no reset wrote it
        assert pool.detached_head(gitdir) == base == git(again.path, "rev-parse", "HEAD").strip()
        assert git(again.path, "status", "--porcelain", "--ignored") == ""
        assert not (again.path / "pkg" / "new.py").exists() and not (again.path / "pkg" / "staged.txt").exists()
        (again.path / "README.md").write_text("# changed\n")  # the same size as "# project\n"
    finally:
        again.remove()
    last = _again(repo, snodo_home, again, 4)
    try:
        assert os.stat(os.path.join(gitdir, pool.REF_INDEX)).st_ino != recorded  # the reset ran
        assert (last.path / "README.md").read_text() == "# project\n"
        assert git(last.path, "status", "--porcelain", "--ignored") == ""
    finally:
        last.remove()


def _racy_entries(index: str) -> int:
    """Entries git would take for racily clean in ``index``: changed in its own second or later."""
    listing = subprocess.run(
        ["git", "ls-files", "--debug"],
        cwd=Path(index).parent,
        env={**os.environ, "GIT_INDEX_FILE": index},
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    stamp = int(os.stat(index).st_mtime)
    mtimes = [int(line.split()[1].split(":")[0]) for line in listing.splitlines() if line.strip().startswith("mtime:")]
    assert mtimes
    return sum(1 for m in mtimes if m >= stamp)


def test_a_fresh_copys_racy_record_is_dated_once_checked_and_still_sees_changes(
    tmp_path: Path, snodo_home: Path
) -> None:
    """A fresh checkout writes its files in the second its index is written, so git takes
    every entry for racily clean and reads every file on each check (0.25 s a run on 30,000
    files). The first restore that finds them all as recorded dates the record to when it
    checked: no entry is racy any more, and a later change is still seen, even one of the
    same size whose mtime was set back (its ctime cannot be)."""
    repo = _project(tmp_path)
    wt = create_worktree(repo, snodo_home, "t1", "run00001")
    gitdir = wt.slot.meta()["gitdir"] if wt.slot is not None else ""
    ref = os.path.join(gitdir, pool.REF_INDEX)
    os.utime(
        ref, (os.stat(ref).st_atime, int(os.stat(wt.path / "README.md").st_mtime))
    )  # as a quick checkout leaves it
    assert _racy_entries(ref) > 0
    time.sleep(1.1)
    again = _again(repo, snodo_home, wt, 2)
    assert _racy_entries(ref) == 0
    assert _racy_entries(os.path.join(gitdir, "index")) == 0  # the copy's own index is the same file
    readme = again.path / "README.md"
    before = os.stat(readme)
    readme.write_text("# changed\n")  # the same size as "# project\n"
    os.utime(readme, ns=(before.st_atime_ns, before.st_mtime_ns))
    last = _again(repo, snodo_home, again, 3)
    try:
        assert readme.read_text() == "# project\n"
        assert git(last.path, "status", "--porcelain", "--ignored") == ""
    finally:
        last.remove()


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


def test_the_names_repaired_by_name_shrink_to_the_racy_ones(tmp_path: Path) -> None:
    """A file whose inode last changed before the second the restore's index was written
    leaves the list (git sees any later ``chmod`` of it by its ctime); one changed in that
    second or later, one repaired now, and one in a directory not looked at stay."""
    from snodo.engine.poolmodes import repair_files

    root = tmp_path / "copy"
    (root / "d").mkdir(parents=True)
    (root / "other").mkdir()
    for name in ("d/old.txt", "d/bad.txt", "other/unseen.txt"):
        (root / name).write_text("x\n")
    os.chmod(root / "d" / "bad.txt", 0o600)  # not what a checkout gives it
    paths = ["d/old.txt", "d/bad.txt", "other/unseen.txt"]
    real = {str(root), str(root / "d")}

    kept: list[str] = []
    assert repair_files(root, paths, real, kept=kept, racy_from=int(time.time()) + 5) == 1  # an index of later
    assert stat.S_IMODE((root / "d" / "bad.txt").stat().st_mode) == FILE_MODE
    assert kept == ["d/bad.txt", "other/unseen.txt"]

    kept = []
    assert repair_files(root, paths, real, kept=kept, racy_from=int((root / "d" / "old.txt").stat().st_ctime)) == 0
    assert kept == paths  # changed in the index's second: all still racy


def test_the_record_of_names_keeps_every_name_and_refuses_an_older_form(tmp_path: Path) -> None:
    """One string per directory, its names joined with "/": names with spaces, newlines and bytes that are
    no UTF-8 come back as they were; a record in the older form (a list per directory) is
    no record (the restore reads every directory once, then writes the new form)."""
    import json

    root = tmp_path / "copy"
    (root / "sub dir").mkdir(parents=True)
    odd = os.fsdecode(b"caf\xe9-\n.txt")
    for name in ("a.txt", "b c.txt", odd):
        (root / "sub dir" / name).write_text("x\n")
    (root / "empty").mkdir()
    gitdir = tmp_path / "gitdir"
    gitdir.mkdir()
    poolscan.save(str(gitdir), root, None, 0)
    record = poolscan.load(str(gitdir))
    assert record is not None
    assert sorted(poolscan._names(record[""][4])) == ["empty", "sub dir"]
    assert sorted(poolscan._names(record["sub dir"][5])) == sorted(["a.txt", "b c.txt", odd])
    assert poolscan._names(record["empty"][4]) == [] and poolscan._names(record["empty"][5]) == []
    # a name the record lacks is deleted by the sweep; the recorded ones stay
    time.sleep(0.01)
    (root / "sub dir" / "left.txt").write_text("left by a run\n")
    swept = poolscan.sweep(root, {k: [*v[:3], True, *v[4:]] for k, v in record.items()})
    assert swept is not None and swept.deleted == 1
    assert sorted(os.listdir(root / "sub dir")) == sorted(["a.txt", "b c.txt", odd])
    older = {rel: [*v[:4], poolscan._names(v[4]), poolscan._names(v[5])] for rel, v in record.items()}
    (gitdir / poolscan.RECORD).write_text(json.dumps(older))
    assert poolscan.load(str(gitdir)) is None
    joined_with_nul = {rel: [*v[:4], v[4].replace("/", "\0"), v[5].replace("/", "\0")] for rel, v in record.items()}
    (gitdir / poolscan.RECORD).write_text(json.dumps(joined_with_nul))
    assert poolscan.load(str(gitdir)) is None
