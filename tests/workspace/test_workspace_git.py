"""The git tools over real repositories: guarded staging, commits, branches and merges."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from snodo.base.errors import PathValidationError, ToolError
from snodo.workspace import Git, PathGuard, Workspace

from .conftest import PROTECTED, git, snapshot


def _dirty(root: Path) -> bool:
    return bool(git(root, "status", "--porcelain"))


def _staged(root: Path) -> list[str]:
    return git(root, "diff", "--cached", "--name-only").split()


def test_one_bad_path_stages_nothing(project: Path, workspace: Workspace, repo: Git) -> None:
    workspace.write_file("src/a.py", "a\n")
    workspace.write_file("src/b.py", "b\n")
    (project / ".snodo/protocol.yml").write_text("tampered\n")  # changed behind the tool surface
    with pytest.raises(PathValidationError, match=r"\.snodo/` is protected"):
        repo.stage_files(["src/a.py", ".snodo/protocol.yml", "src/b.py"])
    assert _staged(project) == []


def test_a_directory_hiding_protected_changes_stages_nothing(project: Path, repo: Git) -> None:
    (project / "pkg/.snodo").mkdir(parents=True)
    (project / "pkg/.snodo/protocol.yml").write_text("nested\n")
    (project / "pkg/ok.py").write_text("ok\n")
    with pytest.raises(PathValidationError, match=r"pkg/\.snodo/protocol\.yml"):
        repo.stage_files(["pkg"])
    assert _staged(project) == []


def test_pathspecs_are_literal(project: Path, repo: Git) -> None:
    (project / ".snodo/x.yml").write_text("x\n")
    with pytest.raises(ToolError, match="did not match"):
        repo.stage_files(["*.yml"])
    assert _staged(project) == []


def test_stage_files_needs_a_list(repo: Git) -> None:
    bad_arguments: tuple[list[str] | str, ...] = ("src/app.py", [])
    for bad in bad_arguments:
        with pytest.raises(ToolError, match="non-empty list"):
            repo.stage_files(bad)
    with pytest.raises(PathValidationError, match="must be a string"):
        repo.stage_files([7])  # type: ignore[list-item]


def test_commit_refuses_what_was_staged_behind_its_back(project: Path, repo: Git) -> None:
    head = repo.head()
    (project / ".snodo/protocol.yml").write_text("tampered\n")
    git(project, "add", ".snodo/protocol.yml")
    with pytest.raises(PathValidationError, match=r"\.snodo/` is protected"):
        repo.commit("sneak it in")
    assert repo.head() == head


def test_commit_refuses_empty_messages_and_empty_index(project: Path, workspace: Workspace, repo: Git) -> None:
    with pytest.raises(ToolError, match="nothing is staged"):
        repo.commit("nothing")
    workspace.write_file("src/a.py", "a\n")
    repo.stage_files(["src/a.py"])
    for message in ("", "   \n"):
        with pytest.raises(ToolError, match="non-empty message"):
            repo.commit(message)
    assert _staged(project) == ["src/a.py"]


def test_commit_branch_merge_round_trip(project: Path, workspace: Workspace, repo: Git) -> None:
    assert repo.is_repo() and repo.get_status()["branch"] == "main" and not _dirty(project)
    start = repo.head()
    created = repo.create_branch("feature/x")
    assert created == {"branch": "feature/x", "head": start}
    git(project, "checkout", "-q", "feature/x")
    workspace.write_file("src/feature.py", "feature = 1\n")
    workspace.write_file("src/app.py", "print('changed')\n")
    status = repo.get_status()
    assert status["branch"] == "feature/x"
    assert status["untracked"] == ["src/feature.py"] and status["unstaged"] == ["src/app.py"]
    assert "+print('changed')" in repo.read_diff()
    repo.stage_files(["src/feature.py", "src/app.py"])
    assert repo.get_status()["staged"] == ["src/app.py", "src/feature.py"]
    assert "+feature = 1" in repo.read_diff(staged=True)
    sha = repo.commit("add the feature\n\nwith a body")
    assert sha == repo.head() != start
    assert repo.changed_files(str(start)) == ["src/app.py", "src/feature.py"]
    author_and_message = git(project, "log", "-1", "--format=%an <%ae>|%B")
    assert author_and_message.startswith("snodo <snodo@localhost>|add the feature")
    git(project, "checkout", "-q", "main")
    assert not (project / "src/feature.py").exists()
    merged = repo.merge_branch("feature/x", "merge the feature")
    assert merged["merged"] == "feature/x" and merged["head"] == repo.head()
    assert git(project, "log", "-1", "--format=%s|%P").startswith("merge the feature|")
    assert (project / "src/feature.py").read_text() == "feature = 1\n"
    assert "feature.py" in repo.read_diff(str(start))
    assert repo.delete_branch("feature/x") == {"deleted": "feature/x"}
    assert "feature/x" not in git(project, "branch", "--list")


def test_an_identity_the_repository_has_is_kept(project: Path, workspace: Workspace, repo: Git) -> None:
    git(project, "config", "user.name", "Ada")
    git(project, "config", "user.email", "ada@example.com")
    workspace.write_file("a.txt", "a\n")
    repo.stage_files(["a.txt"])
    repo.commit("by ada")
    assert git(project, "log", "-1", "--format=%an <%ae> %cn").strip() == "Ada <ada@example.com> Ada"


def test_merge_refuses_a_branch_that_changes_governance_state(project: Path, repo: Git) -> None:
    git(project, "checkout", "-q", "-b", "human")
    (project / ".snodo/protocol.yml").write_text("loosened\n")
    git(project, "commit", "-q", "-am", "loosen the protocol")
    git(project, "checkout", "-q", "main")
    head, before = repo.head(), snapshot(project)
    with pytest.raises(PathValidationError, match=r"\.snodo/` is protected"):
        repo.merge_branch("human")
    assert repo.head() == head and snapshot(project) == before


def test_a_conflicted_merge_is_aborted(project: Path, workspace: Workspace, repo: Git) -> None:
    repo.create_branch("other")
    workspace.write_file("src/app.py", "main side\n")
    repo.stage_files(["src/app.py"])
    repo.commit("main side")
    git(project, "checkout", "-q", "other")
    workspace.write_file("src/app.py", "other side\n")
    repo.stage_files(["src/app.py"])
    repo.commit("other side")
    git(project, "checkout", "-q", "main")
    head = repo.head()
    with pytest.raises(ToolError, match="CONFLICT"):
        repo.merge_branch("other")
    assert repo.head() == head and not _dirty(project)
    assert not (project / ".git/MERGE_HEAD").exists()


@pytest.mark.parametrize("name", ["-D", "--force", "bad..name", "@{-1}", "a b", "", "x.lock", "HEAD~1"])
def test_bad_branch_names_are_refused(repo: Git, name: str) -> None:
    for call in (repo.create_branch, repo.merge_branch, repo.delete_branch):
        with pytest.raises(ToolError):
            call(name)


def test_options_are_not_accepted_as_refs(repo: Git, tmp_path: Path) -> None:
    target = tmp_path / "written"
    for call in (lambda: repo.read_diff(f"--output={target}"), lambda: repo.create_branch("b", "--orphan")):
        with pytest.raises(ToolError, match="must not start with '-'"):
            call()
    assert not target.exists()


def test_errors_carry_gits_explanation(repo: Git) -> None:
    with pytest.raises(ToolError, match=r"not found|not fully merged"):
        repo.delete_branch("no-such-branch")
    with pytest.raises(ToolError, match="git diff failed"):
        repo.read_diff("no-such-ref")


def test_helpers_on_a_fresh_and_a_plain_directory(tmp_path: Path) -> None:
    plain = tmp_path / "plain"
    plain.mkdir()
    assert not Git(plain, PathGuard(plain)).is_repo()
    fresh = tmp_path / "fresh"
    fresh.mkdir()
    subprocess.run(["git", "init", "-q", "-b", "trunk", str(fresh)], check=True)
    repo = Git(fresh, PathGuard(fresh, PROTECTED))
    assert repo.is_repo() and repo.head() is None and repo.get_status()["branch"] == "trunk"
    assert repo.get_status() == {
        "branch": "trunk",
        "staged": [],
        "unstaged": [],
        "untracked": [],
        "conflicted": [],
    }
    (fresh / "first.txt").write_text("1\n")
    assert _dirty(fresh)
    repo.stage_files(["first.txt"])
    sha = repo.commit("first")
    assert repo.head() == sha and not _dirty(fresh)


def test_status_reports_conflicts_and_detached_heads(project: Path, workspace: Workspace, repo: Git) -> None:
    start = str(repo.head())
    repo.create_branch("other")
    workspace.write_file("src/app.py", "main side\n")
    repo.stage_files(["src/app.py"])
    repo.commit("main side")
    git(project, "checkout", "-q", "other")
    workspace.write_file("src/app.py", "other side\n")
    repo.stage_files(["src/app.py"])
    repo.commit("other side")
    with pytest.raises(subprocess.CalledProcessError):
        git(project, "merge", "main")
    assert repo.get_status()["conflicted"] == ["src/app.py"]
    with pytest.raises(ToolError, match="already in progress"):
        repo.merge_branch("main")
    assert (project / ".git/MERGE_HEAD").exists()  # the human's merge is not thrown away
    git(project, "merge", "--abort")
    git(project, "checkout", "-q", start)
    assert repo.get_status()["branch"] is None
