"""A served checkout's git status is re-read only after something changed (issue 26).

Every answer is compared with a fresh ``git status --porcelain`` of snodo's own git, and
the count of git processes says when the kept answer was used: never after a change to
the tree, the index, a ref or the configuration; always when the configuration may make
git read files nobody watches.
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from snodo.governance import treewatch
from snodo.governance.runner import uncommitted
from snodo.governance.service import Project, validate_task
from snodo.governance.treewatch import StatusWatch
from snodo.plugin.host import get_plugin_manager
from snodo.protocol import load_protocol
from tests.conftest import make_repo

pytestmark = pytest.mark.skipif(not Path("/proc/self/mounts").exists(), reason="inotify is Linux only")


def git(root: Path, *args: str) -> None:
    subprocess.run(["git", "-C", str(root), *args], check=True, capture_output=True)


@pytest.fixture
def repo(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("HOME", str(tmp_path / "user"))
    (tmp_path / "user").mkdir()
    root = make_repo(tmp_path / "repo")
    (root / ".gitignore").write_text("venv/\n")
    (root / "venv").mkdir()
    (root / "venv" / "lib.py").write_text("x = 1\n")
    (root / "pkg").mkdir()
    (root / "pkg" / "mod.py").write_text("a = 1\n")
    git(root, "add", "-A")
    git(root, "commit", "-q", "-m", "base")
    return root


def step(watch: StatusWatch, root: Path, reads: int) -> tuple[str, ...]:
    """The watch's answer, checked against git itself and against the reads expected."""
    got = watch.uncommitted()
    assert got == uncommitted(root)
    assert watch.reads == reads, f"expected {reads} git status processes, saw {watch.reads}"
    return got


def test_the_kept_answer_is_used_only_while_nothing_changed(repo: Path) -> None:
    watch = StatusWatch(repo)
    step(watch, repo, 1)  # learns what git ignores; nothing watched while it ran: not kept
    step(watch, repo, 2)  # read with every directory watched: kept
    for _ in range(3):
        assert step(watch, repo, 2) == ()
    (repo / "notes.txt").write_text("new\n")
    assert step(watch, repo, 3) == ("?? notes.txt",)
    step(watch, repo, 3)
    (repo / "notes.txt").write_text("an untracked file's content changes nothing\n")
    step(watch, repo, 3)
    (repo / "venv" / "lib.py").write_text("inside an ignored directory\n")
    (repo / "venv" / "new.py").write_text("")
    step(watch, repo, 3)
    (repo / "pkg" / "mod.py").write_text("a = 2\n")  # a tracked file, one level down
    assert step(watch, repo, 4) == (" M pkg/mod.py", "?? notes.txt")
    (repo / "pkg" / "deep").mkdir()  # a new directory: read, but not kept until it was watched
    step(watch, repo, 5)
    (repo / "pkg" / "deep" / "x.py").write_text("")
    assert "?? pkg/deep/" in step(watch, repo, 6)
    step(watch, repo, 6)
    git(repo, "add", "pkg/mod.py")  # the index
    assert step(watch, repo, 7)[0] == "M  pkg/mod.py"
    git(repo, "commit", "-q", "-m", "more")  # HEAD's ref and the index
    assert step(watch, repo, 8) == ("?? notes.txt", "?? pkg/deep/")
    (repo / "notes.txt").unlink()
    assert step(watch, repo, 9) == ("?? pkg/deep/",)
    (repo / ".gitignore").write_text("venv/\npkg/deep/\n")  # what is ignored changed
    assert step(watch, repo, 10) == (" M .gitignore",)
    step(watch, repo, 10)
    git(repo, "checkout", "-q", "-b", "other")  # HEAD names another branch
    step(watch, repo, 11)
    watch.close()


def test_a_tracked_file_changed_through_a_hard_link_is_seen(repo: Path) -> None:
    """Writing an untracked file changes nothing, unless it is a tracked file's other name."""
    watch = StatusWatch(repo)
    step(watch, repo, 1)
    step(watch, repo, 2)
    os.link(repo / "pkg" / "mod.py", repo / "alias.txt")
    assert step(watch, repo, 3) == ("?? alias.txt",)
    (repo / "alias.txt").write_text("a = 9\n")  # pkg/mod.py too
    assert step(watch, repo, 4) == (" M pkg/mod.py", "?? alias.txt")
    watch.close()


def test_moved_directories_are_watched_again(repo: Path) -> None:
    """After a directory is renamed, events below it name other paths: all is watched anew."""
    watch = StatusWatch(repo)
    step(watch, repo, 1)
    step(watch, repo, 2)
    (repo / "pkg").rename(repo / "lib")
    got = step(watch, repo, 3)
    assert " D pkg/mod.py" in got and "?? lib/" in got
    step(watch, repo, 4)  # read again with everything watched anew: kept from here
    step(watch, repo, 4)
    (repo / "pkg").mkdir()
    (repo / "pkg" / "mod.py").write_text("a = 1\n")
    assert step(watch, repo, 5) == ("?? lib/",)  # pkg/ was new: not kept yet
    step(watch, repo, 6)
    (repo / "lib" / "mod.py").write_text("inside a directory listed untracked: still untracked\n")
    step(watch, repo, 6)
    watch.close()


def test_a_change_to_the_global_configuration_is_seen(repo: Path) -> None:
    watch = StatusWatch(repo)
    step(watch, repo, 1)
    step(watch, repo, 2)
    step(watch, repo, 2)
    (Path.home() / ".gitconfig").write_text("[status]\n\tshowUntrackedFiles = no\n")
    step(watch, repo, 3)
    watch.close()


def test_a_configuration_that_points_elsewhere_turns_the_cache_off(repo: Path, tmp_path: Path) -> None:
    """``core.excludesFile`` (or an include) can name any file: no answer is kept."""
    elsewhere = tmp_path / "excludes"
    elsewhere.write_text("")
    git(repo, "config", "core.excludesFile", str(elsewhere))
    watch = StatusWatch(repo)
    for n in range(1, 4):
        step(watch, repo, n)
    (repo / "later.txt").write_text("")
    step(watch, repo, 4)
    elsewhere.write_text("later.txt\n")
    assert step(watch, repo, 5) == ()
    watch.close()


SERVED = """\
protocol_id: watched
name: watched
modes:
  - mode_id: m
    tools: [read, validate]
    validators: [tests]
validators:
  - {validator_id: tests, validator_type: command, tooling: {command: "true"}}
"""


def test_a_served_project_reports_each_change_in_the_verdict(repo: Path, tmp_path: Path) -> None:
    """End to end through the shared validate_task with a real confined validator: the
    verdict's ``dirty_tree`` is the tree of that call, with no git status while unchanged."""
    (repo / ".snodo").mkdir()
    (repo / ".snodo" / "protocol.yml").write_text(SERVED)
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", "protocol")
    plugins = get_plugin_manager()
    project = Project(
        load_protocol(repo / ".snodo" / "protocol.yml", plugins), plugins, home=tmp_path / "home", watch_tree=True
    )

    def dirty(spec: str) -> list[str]:
        outcome = validate_task(project, spec=spec, issue_token=False)
        assert outcome.status == "pass", outcome.payload()
        return list(outcome.results[0].details.get("dirty_tree", []))

    dirty("first")
    state = dirty("second")  # snodo's own files of the first call (audit log, its lock)
    assert "?? .snodo/audit.log" in state
    reads = project._tree_watch.reads
    for n in range(3):
        assert dirty(f"unchanged {n}") == state
    assert project._tree_watch.reads == reads, "the audit log's appends re-read the tree"
    (repo / "pkg" / "mod.py").write_text("a = 3\n")
    assert dirty("changed") == sorted([" M pkg/mod.py", *state])
    # a workspace other than the checkout is read with git each time, as before
    assert project.uncommitted_reader(tmp_path) is None


def test_a_tree_with_too_many_directories_is_read_with_git_each_time(
    repo: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(treewatch, "MAX_WATCHES", 1)
    watch = StatusWatch(repo)
    for n in range(1, 4):
        step(watch, repo, n)
    (repo / "pkg" / "mod.py").write_text("a = 5\n")
    assert step(watch, repo, 4) == (" M pkg/mod.py",)
    assert watch._fd == -1  # the watches were given back


# -- Stillness: anything at all changed since the last look (the engine's working copies) --


def _tree(root: Path) -> list[str]:
    (root / "a" / "b").mkdir(parents=True)
    (root / "top.txt").write_text("top\n")
    (root / "a" / "b" / "deep.txt").write_text("deep\n")
    return ["", "a", "a/b"]


@pytest.mark.parametrize(
    "change",
    [
        lambda r: (r / "a" / "b" / "deep.txt").write_text("other\n"),
        lambda r: (r / "a" / "b" / "deep.txt").chmod(0o755),
        lambda r: (r / "a" / "new.txt").write_text("new\n"),
        lambda r: (r / "top.txt").unlink(),
        lambda r: (r / "a" / "b" / "deep.txt").rename(r / "a" / "b" / "moved.txt"),
        lambda r: (r / "a" / "c").mkdir(),
        lambda r: os.utime(r / "top.txt", (1, 1)),
    ],
    ids=["content", "mode", "created", "removed", "renamed", "directory", "times"],
)
def test_stillness_ends_with_any_change_below_and_holds_again_after_the_look(tmp_path: Path, change) -> None:  # type: ignore[no-untyped-def]
    root = tmp_path / "copy"
    watch = treewatch.Stillness(root, _tree(root))
    try:
        assert watch.still() and watch.still()  # nothing: still, look after look
        (root / "a" / "b" / "deep.txt").read_text()  # reading changes nothing
        assert watch.still()
        change(root)
        assert not watch.still()
        assert watch.still()  # that change was seen; nothing since
    finally:
        watch.close()


def test_a_directory_that_appeared_is_watched_from_then_on_with_what_it_holds(tmp_path: Path) -> None:
    root = tmp_path / "copy"
    watch = treewatch.Stillness(root, _tree(root))
    try:
        (root / "a" / "fresh" / "deeper").mkdir(parents=True)  # the caller's own writing...
        assert watch.absorb()  # ...taken as known
        assert watch.still()
        (root / "a" / "fresh" / "deeper" / "later.txt").write_text("later\n")
        assert not watch.still()  # a change below it is seen
    finally:
        watch.close()


def test_stillness_is_off_for_good_when_it_cannot_watch_everything(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    root = tmp_path / "copy"
    dirs = _tree(root)
    missing = treewatch.Stillness(root, [*dirs, "gone"])  # a directory named that is not there
    assert missing.off and not missing.still() and not missing.absorb()
    monkeypatch.setattr(treewatch, "MAX_WATCHES", 2)
    too_many = treewatch.Stillness(root, dirs)
    assert "more than 2 directories" in too_many.off and not too_many.still()
    monkeypatch.setattr(treewatch, "_fs_type", lambda _path: "nfs")
    remote = treewatch.Stillness(root, dirs[:1])
    assert "nfs file system" in remote.off and not remote.still()
