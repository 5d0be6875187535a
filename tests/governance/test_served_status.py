"""A served checkout's uncommitted changes, read by git on every call (issue 42).

The server used to keep the last ``git status`` while inotify reported no change; now each
phase asks git once. What the verdict reports must follow every change, including those a
watch could miss or a stat check could be fooled by: a tracked file changed through a hard
link, and one rewritten to the same size with its mtime set back (git's racy-clean rule and
the ctime catch it). Real git, the shared ``validate_task`` with a real confined validator.
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from snodo.governance.runner import uncommitted
from snodo.governance.service import Project, validate_task
from snodo.plugin.host import get_plugin_manager
from snodo.protocol import load_protocol
from tests.conftest import make_repo

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


def git(root: Path, *args: str) -> None:
    subprocess.run(["git", "-C", str(root), *args], check=True, capture_output=True)


@pytest.fixture
def repo(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("HOME", str(tmp_path / "user"))
    (tmp_path / "user").mkdir()
    root = make_repo(tmp_path / "repo")
    (root / ".gitignore").write_text("venv/\n")
    (root / "pkg").mkdir()
    (root / "pkg" / "mod.py").write_text("a = 1\n")
    (root / ".snodo").mkdir()
    (root / ".snodo" / "protocol.yml").write_text(SERVED)
    git(root, "add", "-A")
    git(root, "commit", "-q", "-m", "base")
    return root


def test_a_served_project_reports_each_change_in_the_verdict(repo: Path, tmp_path: Path) -> None:
    """Every call's ``dirty_tree`` is the tree of that call, as git itself lists it."""
    plugins = get_plugin_manager()
    project = Project(
        load_protocol(repo / ".snodo" / "protocol.yml", plugins), plugins, home=tmp_path / "home", served=True
    )

    def dirty(spec: str) -> list[str]:
        outcome = validate_task(project, spec=spec, issue_token=False)
        assert outcome.status == "pass", outcome.payload()
        found = list(outcome.results[0].details.get("dirty_tree", []))
        assert found == sorted(uncommitted(repo))
        return found

    dirty("first")
    state = dirty("second")  # runtime state lives in the git dir: the first call left nothing here
    for n in range(3):
        assert dirty(f"unchanged {n}") == state
    (repo / "pkg" / "mod.py").write_text("a = 3\n")
    assert dirty("changed") == sorted([" M pkg/mod.py", *state])
    git(repo, "checkout", "-q", "--", "pkg/mod.py")
    assert dirty("back") == state
    # a tracked file written through another name (a hard link) is seen
    os.link(repo / "pkg" / "mod.py", repo / "alias.txt")
    (repo / "alias.txt").write_text("a = 9\n")
    assert dirty("through a link") == sorted([" M pkg/mod.py", "?? alias.txt", *state])
    (repo / "alias.txt").unlink()
    git(repo, "checkout", "-q", "--", "pkg/mod.py")
    # ignored files are not listed; a directory's new file is
    (repo / "venv").mkdir()
    (repo / "venv" / "lib.py").write_text("x = 1\n")
    (repo / "pkg" / "new.py").write_text("n = 1\n")
    assert dirty("ignored and new") == sorted(["?? pkg/new.py", *state])


def test_a_same_size_rewrite_with_its_mtime_set_back_is_seen(repo: Path, tmp_path: Path) -> None:
    """Racy git: the index refreshed in the same second as the file, then the file rewritten
    to the same size and given its old mtime back. Only its ctime and content differ."""
    git(repo, "update-index", "-q", "--refresh")  # the index holds the file's stat data now
    plugins = get_plugin_manager()
    project = Project(
        load_protocol(repo / ".snodo" / "protocol.yml", plugins), plugins, home=tmp_path / "home", served=True
    )
    mod = repo / "pkg" / "mod.py"
    before = os.stat(mod)
    mod.write_text("a = 2\n")  # the same size as "a = 1\n"
    os.utime(mod, ns=(before.st_atime_ns, before.st_mtime_ns))
    assert os.stat(mod).st_size == before.st_size and os.stat(mod).st_mtime_ns == before.st_mtime_ns
    outcome = validate_task(project, spec="racy", issue_token=False)
    assert " M pkg/mod.py" in outcome.results[0].details.get("dirty_tree", [])
