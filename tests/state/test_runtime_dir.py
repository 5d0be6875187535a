"""Where a project's runtime state lives (snodo.state.runtime.runtime_dir), on real git
repositories: the common git directory, whatever checkout or subdirectory asks."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from snodo.base.errors import EnvironmentProblem
from snodo.state.runtime import runtime_dir


def _git(cwd: Path, *args: str) -> None:
    subprocess.run(["git", "-C", str(cwd), *args], check=True, capture_output=True)


def test_a_project_below_the_top_gets_its_own_folder(tmp_path: Path) -> None:
    repo = tmp_path / "repo"
    (repo / "services" / "api" / ".snodo").mkdir(parents=True)
    _git(tmp_path, "init", "-q", str(repo))
    assert runtime_dir(repo) == repo / ".git" / "snodo"
    assert runtime_dir(repo / "services" / "api") == repo / ".git" / "snodo" / "projects" / "services" / "api"
    assert (repo / ".git" / "snodo" / "projects" / "services" / "api").is_dir()


def test_a_git_directory_inside_the_working_tree_is_refused(tmp_path: Path) -> None:
    repo = tmp_path / "repo"
    repo.mkdir()
    _git(tmp_path, "init", "-q", f"--separate-git-dir={repo / 'meta'}", str(repo))
    with pytest.raises(EnvironmentProblem, match="inside its working tree") as caught:
        runtime_dir(repo)
    assert caught.value.hint and "outside the working tree" in caught.value.hint
    assert not (repo / "meta" / "snodo").exists()


def test_a_git_directory_elsewhere_holds_the_state(tmp_path: Path) -> None:
    repo, meta = tmp_path / "repo", tmp_path / "meta.git"
    repo.mkdir()
    _git(tmp_path, "init", "-q", f"--separate-git-dir={meta}", str(repo))
    assert runtime_dir(repo) == meta / "snodo"


def test_outside_git_nothing_is_created(tmp_path: Path) -> None:
    (tmp_path / "plain" / ".snodo").mkdir(parents=True)
    with pytest.raises(EnvironmentProblem, match="is not a git repository"):
        runtime_dir(tmp_path / "plain")
    assert sorted(p.name for p in (tmp_path / "plain").rglob("*")) == [".snodo"]


def test_a_committed_file_in_snodo_is_the_projects_and_stays(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    repo = tmp_path / "repo"
    (repo / ".snodo" / "jobs" / "job-1").mkdir(parents=True)
    (repo / ".snodo" / "state.json").write_text('{"current_mode": "dev"}\n')
    _git(tmp_path, "init", "-q", str(repo))
    _git(repo, "add", ".snodo/state.json")
    _git(repo, "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-q", "-m", "a committed state.json")
    (repo / ".snodo" / "jobs" / "job-1" / "spec.md").write_text("old job\n")  # an older snodo's, untracked
    state = runtime_dir(repo)
    assert (state / "jobs" / "job-1" / "spec.md").read_text() == "old job\n"
    assert not (state / "state.json").exists() and (repo / ".snodo" / "state.json").is_file()
    assert sorted(p.name for p in (repo / ".snodo").iterdir()) == ["state.json"]
    said = capsys.readouterr().err
    assert "jobs/" in said and "state.json" not in said
