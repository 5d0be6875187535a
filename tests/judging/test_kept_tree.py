"""The judged tree kept between snapshots (``<git common dir>/snodo/judged``): each snapshot
writes only the paths that differ from the tree kept, and what is kept is exactly the
judged tree — the same bytes, modes, links and index a fresh copy from git's objects holds —
whatever the change did (files added, changed, removed, a file become a directory, a
directory become a link and back), never writing through a link, never outside itself.
"""

from __future__ import annotations

import fcntl
import os
import shutil
import threading
from pathlib import Path

import pytest

from snodo.judging.copies import Snapshot
from snodo.process.runner import run_process
from snodo.sandbox import SandboxPolicy
from snodo.sandbox.bwrap import BwrapBackend
from tests.conftest import git, make_repo


def commit(repo: Path, files: dict[str, str | None], links: dict[str, str] | None = None) -> str:
    """Commit ``files`` (``None``: removed) and ``links`` (symbolic links) on top of HEAD;
    the new commit's tree id."""
    for path, text in files.items():
        target = repo / path
        if text is None:
            if target.is_dir() and not target.is_symlink():
                shutil.rmtree(target)
            else:
                target.unlink()
            continue
        if target.is_symlink():
            target.unlink()
        elif target.is_dir():
            shutil.rmtree(target)
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(text)
        if path.endswith(".sh"):
            target.chmod(0o755)
    for path, to in (links or {}).items():
        target = repo / path
        if target.is_dir() and not target.is_symlink():
            shutil.rmtree(target)
        elif os.path.lexists(target):
            target.unlink()
        os.symlink(to, target)
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "--allow-empty", "-m", "step")
    return git(repo, "rev-parse", "HEAD^{tree}").strip()


def listing(root: Path) -> dict[str, tuple[str, object]]:
    """Every entry below ``root`` but ``.git``: file bytes and executable bit, link targets,
    directories."""
    out: dict[str, tuple[str, object]] = {}
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames[:] = [d for d in dirnames if not (Path(dirpath) == root and d == ".git")]
        for name in dirnames + filenames:
            path = Path(dirpath, name)
            rel = path.relative_to(root).as_posix()
            if path.is_symlink():
                out[rel] = ("link", os.readlink(path))
            elif path.is_dir():
                out[rel] = ("dir", None)
            else:
                out[rel] = ("file", (path.read_bytes(), os.access(path, os.X_OK)))
    return out


def kept(repo: Path, tree: str) -> tuple[Path, dict[str, tuple[str, object]]]:
    """Take a snapshot of ``tree``: the kept tree's listing, and a fresh copy's to compare."""
    snapshot = Snapshot(repo, tree, base=None)
    try:
        shared = snapshot.shared().path
        fresh = snapshot.copy("fresh").path  # written whole from git's objects
        assert listing(shared) == listing(fresh)
        # and its index, patched with what changed, is the one `read-tree` gives a fresh copy
        assert git(shared, "ls-files", "-s") == git(fresh, "ls-files", "-s")
        return shared, listing(shared)
    finally:
        snapshot.close()


def test_the_kept_tree_follows_every_kind_of_change(tmp_path: Path) -> None:
    repo = make_repo(tmp_path / "repo")
    victim = tmp_path / "victim"
    victim.mkdir()
    (victim / "x.py").write_text("outside\n")
    steps = [
        ({"src/a.py": "a = 1\n", "src/b.py": "b = 1\n", "d/x.py": "x\n", "run.sh": "echo\n"}, {}),
        ({"src/a.py": "a = 2\n", "src/b.py": None, "src/new/c.py": "c\n", "run.sh": None}, {}),
        ({"d": None}, {"d": str(victim)}),  # a directory becomes a link out of the tree
        ({"d": None, "d/x.py": "x again\n"}, {}),  # and a directory again: nothing written through the link
        ({"src/a.py": None, "src/new/c.py": None, "src": "now a file\n"}, {}),
    ]
    path = None
    for files, links in steps:
        tree = commit(repo, files, links)
        path, seen = kept(repo, tree)
        assert seen == listing(repo)
    assert path is not None and (path / "src").read_text() == "now a file\n"
    assert (victim / "x.py").read_text() == "outside\n" and sorted(os.listdir(victim)) == ["x.py"]
    assert not list((repo / ".git").glob("sharedindex.*"))  # the kept index's files stay in its own .git


def test_only_what_differs_is_written(tmp_path: Path) -> None:
    repo = make_repo(tmp_path / "repo")
    first = commit(repo, {f"pkg/m{i}.py": f"v = {i}\n" for i in range(50)})
    held = [Snapshot(repo, first, base=None) for _ in range(2)]  # both kept trees hold it
    inodes = {os.stat(s.shared().path / "pkg" / "m1.py").st_ino for s in held}
    for snapshot in held:
        snapshot.close()
    second = commit(repo, {"pkg/m0.py": "v = 'changed'\n"})
    path, seen = kept(repo, second)
    assert seen["pkg/m0.py"] == ("file", (b"v = 'changed'\n", False))
    assert os.stat(path / "pkg" / "m1.py").st_ino in inodes  # the same file: not written again


def test_a_kept_index_whose_shared_index_is_gone_is_read_anew(tmp_path: Path) -> None:
    repo = make_repo(tmp_path / "repo")
    shared: list[Path] = []
    for n in range(4):  # a slot written whole, then patched: a split index and its shared one
        path, _ = kept(repo, commit(repo, {f"m{n}.py": "m = 1\n"}))
        shared = list((path / ".git").glob("sharedindex.*"))
    assert shared
    for name in (repo / ".git" / "snodo" / "judged").glob("*/work/.git/sharedindex.*"):
        name.unlink()  # as a .git rebuilt without them leaves it
    _, seen = kept(repo, commit(repo, {"c.py": "c = 1\n"}))
    assert seen == listing(repo)


def test_the_judged_trees_an_older_snodo_kept_go_once_no_run_holds_them(tmp_path: Path) -> None:
    repo = make_repo(tmp_path / "repo")
    old = repo / ".git" / "snodo" / "trees"
    for n in ("0", "1"):
        (old / n / "work").mkdir(parents=True)
        (old / n / "work" / "a.py").write_text("old\n")
        (old / n / "lock").touch()
        (old / n / "state").write_text("dirty\n")
        os.utime(old / n / "state", (0, 0))  # used last long ago
    (old / "2").mkdir()
    (old / "2" / "lock").touch()
    (old / "2" / "state").write_text("dirty\n")  # used today: an older snodo may still use it
    held = os.open(old / "1" / "lock", os.O_RDWR)
    try:
        fcntl.flock(held, fcntl.LOCK_EX | fcntl.LOCK_NB)  # a run of the older snodo holds it
        kept(repo, commit(repo, {"a.py": "a = 1\n"}))
        assert sorted(os.listdir(old)) == ["1", "2"]
    finally:
        os.close(held)
    os.utime(old / "2" / "state", (0, 0))
    kept(repo, commit(repo, {"a.py": "a = 2\n"}))
    for thread in threading.enumerate():
        if thread.name == "snodo-discard":
            thread.join()
    assert sorted(p.name for p in (repo / ".git" / "snodo").iterdir()) == ["judged"]


@pytest.mark.parametrize("state", ["dirty", "", "0" * 40])
def test_a_kept_tree_of_unknown_content_is_written_afresh(tmp_path: Path, state: str) -> None:
    repo = make_repo(tmp_path / "repo")
    first = commit(repo, {"a.py": "a = 1\n"})
    path, _ = kept(repo, first)
    (path / "a.py").write_text("left half-way\n")  # a run that stopped while it patched
    (path / "stray.py").write_text("stray\n")
    home = path.parent
    (home / "state").write_text(state + "\n")
    second = commit(repo, {"b.py": "b = 1\n"})
    _, seen = kept(repo, second)
    assert seen == listing(repo)


def test_code_run_in_an_overlay_copy_never_writes_the_kept_tree(tmp_path: Path) -> None:
    repo = make_repo(tmp_path / "repo")
    if not BwrapBackend().overlays(repo / ".git"):
        pytest.skip("this bubblewrap or kernel lays no overlay")
    tree = commit(repo, {"src/app.py": "x = 1\n", "tests/test_a.py": "def test(): pass\n"})
    snapshot = Snapshot(repo, tree, base=None)
    try:
        copy = snapshot.copy("check", overlay=True)
        assert copy.upper is not None and copy.work is not None
        before = listing(copy.path)
        hostile = "echo tampered > src/app.py; rm tests/test_a.py; mkdir -p sub/.git; echo new > new.py; cat src/app.py"
        policy = SandboxPolicy(workspace=copy.path, overlay=(copy.upper, copy.work))
        done = run_process(["sh", "-c", hostile], cwd=copy.path, timeout=60, sandbox=policy)
        assert done.returncode == 0, done.output
        assert "tampered" in done.output  # the validator saw its own writes
        assert listing(copy.path) == before  # nobody else does: the kept tree is the judged tree
        assert (copy.upper / "src" / "app.py").read_text() == "tampered\n"
        assert (copy.upper / "sub" / ".git").is_dir()  # what it planted is where a watch finds it
        other = snapshot.copy("other", overlay=True)
        assert listing(other.path) == before
        snapshot.remove(copy)
    finally:
        snapshot.close()
