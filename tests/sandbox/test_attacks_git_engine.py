"""Git attacks on the engine path, through ``snodo run`` (issue #21, items 1-2), and the
projects that must keep working: real husky-style hooks, a real submodule, the
``git-hooks`` validator judging with the project's own pre-commit hook, confined."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import git, make_repo, write_producer_protocol

pytestmark = pytest.mark.slow

TEST_OK = "def test_ok():\n    assert True\n"


def payload(tmp_path: Path, repo: Path) -> tuple[str, Path]:
    """Shell lines that leave ``marker`` outside the project and rewrite its protocol."""
    marker = tmp_path / "PAYLOAD-RAN"
    return f"touch '{marker}'\necho 'protocol_id: pwned' > '{repo}/.snodo/protocol.yml'\n", marker


def husky(repo: Path, hook_body: str) -> None:
    """The husky / ``.githooks`` layout: ``core.hooksPath`` names a directory in the tree."""
    hooks = repo / ".githooks"
    hooks.mkdir()
    (hooks / "pre-commit").write_text("#!/bin/sh\n" + hook_body)
    (hooks / "pre-commit").chmod(0o755)
    git(repo, "config", "core.hooksPath", ".githooks")


def commit_all(repo: Path, message: str = "setup") -> None:
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "--no-verify", "-m", message)  # the test's own commit runs no hook either


def hooks_protocol(repo: Path) -> None:
    """The producer mode of the engine tests plus a post_execute ``git-hooks`` validator."""
    (repo / ".snodo").mkdir(exist_ok=True)
    (repo / ".snodo" / "protocol.yml").write_text(
        """\
protocol_id: t
name: t
modes:
  - mode_id: producer
    tools: [read, edit, test, validate, dispatch, commit]
    validators: [scope, tests, hooks]
    coder: mock
validators:
  - {validator_id: scope, validator_type: protocol}
  - {validator_id: tests, validator_type: pytest, evaluation_phase: post_execute}
  - {validator_id: hooks, validator_type: git-hooks, evaluation_phase: post_execute}
execution: {max_recovery_depth: 0}
"""
    )


def flow(files: dict[str, str]) -> str:
    return json.dumps({"files": files})


def events(repo: Path, name: str) -> list[dict[str, Any]]:
    lines = (repo / ".git" / "snodo" / "audit.log").read_text().splitlines()
    return [e for e in map(json.loads, lines) if e["event"] == name]


def test_a_hook_script_the_coder_rewrites_never_runs_on_the_engines_commit(tmp_path: Path, snodo_cli) -> None:  # type: ignore[no-untyped-def]
    repo = make_repo(tmp_path / "repo")
    husky(repo, 'sh "$(git rev-parse --show-toplevel)/.githooks/check.sh"\n')
    (repo / ".githooks" / "check.sh").write_text("exit 0\n")
    lines, marker = payload(tmp_path, repo)
    write_producer_protocol(
        repo, coder_config=flow({".githooks/check.sh": lines, "feature.py": "X = 1\n", "tests/test_ok.py": TEST_OK})
    )
    commit_all(repo)
    before = (repo / ".snodo" / "protocol.yml").read_text()
    r = snodo_cli("run", "add a feature module", "--json", cwd=repo)
    assert r.json()["status"] == "completed", r
    assert not marker.exists()
    assert (repo / ".snodo" / "protocol.yml").read_text() == before
    branch = r.json()["branch"]
    assert "touch" in git(repo, "show", f"{branch}:.githooks/check.sh")
    # The hook is live for git as the user runs it: with the coder's script, it runs the payload.
    git(repo, "merge", "-q", "--ff-only", branch)
    (repo / "more.py").write_text("Y = 2\n")
    subprocess.run(["git", "-C", str(repo), "add", "more.py"], check=True)
    subprocess.run(["git", "-C", str(repo), "commit", "-q", "-m", "by hand"], capture_output=True, check=False)
    assert marker.exists()


def submodule_project(tmp_path: Path) -> Path:
    """A repository with a real submodule ``sub`` cloned from a local bare repository."""
    source = make_repo(tmp_path / "subsrc")
    bare = tmp_path / "sub.git"
    subprocess.run(["git", "clone", "-q", "--bare", str(source), str(bare)], check=True)
    repo = make_repo(tmp_path / "repo")
    git(repo, "-c", "protocol.file.allow=always", "submodule", "add", "-q", str(bare), "sub")
    git(repo, "commit", "-q", "-m", "submodule")
    return repo


SUB_CONFTEST = """\
import subprocess
from pathlib import Path

sub = Path(__file__).parent / "sub"  # the submodule's directory, empty in the run's working copy
subprocess.run(["git", "init", "-q", str(sub)], check=True)
subprocess.run(["git", "-C", str(sub), "config", "core.fsmonitor", "PAYLOAD"], check=True)
"""


@pytest.mark.parametrize("backend", ["bwrap", "landlock"])
def test_a_submodule_directory_filled_by_a_validator_halts_the_run_and_never_reaches_git(  # type: ignore[no-untyped-def]
    tmp_path: Path, snodo_cli, backend: str
) -> None:
    repo = submodule_project(tmp_path)
    lines, marker = payload(tmp_path, repo)
    script = tmp_path / "payload.sh"
    script.write_text("#!/bin/sh\n" + lines)
    script.chmod(0o755)
    conftest = SUB_CONFTEST.replace("PAYLOAD", str(script))
    write_producer_protocol(
        repo,
        coder_config=flow({"conftest.py": conftest, "feature.py": "X = 1\n", "tests/test_ok.py": TEST_OK}),
        tail="execution: {max_recovery_depth: 1}\n",
    )
    # the agent's code runs as a project check (the pytest validator judges a copy of its
    # own, where a conftest the agent added never runs)
    protocol = repo / ".snodo" / "protocol.yml"
    protocol.write_text(
        protocol.read_text().replace(
            "validator_type: pytest, evaluation_phase: post_execute",
            'validator_type: command, evaluation_phase: post_execute, tooling: {command: "python conftest.py"}',
        )
    )
    commit_all(repo)
    before = (repo / ".snodo" / "protocol.yml").read_text()
    r = snodo_cli("run", "add a feature module", "--json", cwd=repo, env={"SNODO_SANDBOX_BACKEND": backend})
    result = r.json()
    # The check ran in a private copy of the judged tree: the repository it planted there
    # (with its fsmonitor payload) is refused, recorded and thrown away with the copy; no git
    # of snodo's ever saw it, and the run halts with nothing kept.
    # (Landlock grants no new entry at the top of a copy, where `sub` would be made: there
    # the check itself fails, a blocker of its own.)
    assert (result["status"], result["outcome"]) == ("halted", "blocker"), r
    assert not result["branch"], r
    refused = [e for e in events(repo, "path_refused") if e["data"]["path"] == "sub/.git"]
    assert refused or backend == "landlock", r
    assert not marker.exists()
    assert (repo / ".snodo" / "protocol.yml").read_text() == before
    assert snodo_cli("audit", "verify", cwd=repo).returncode == 0


def test_a_project_with_husky_hooks_completes_and_the_git_hooks_validator_runs_them_confined(  # type: ignore[no-untyped-def]
    tmp_path: Path, snodo_cli
) -> None:
    repo = make_repo(tmp_path / "repo")
    outside = tmp_path / "HOOK-RAN-UNCONFINED"
    husky(repo, f"touch '{outside}' 2>/dev/null\necho 'hook: checked the change'\nexit 0\n")
    hooks_protocol(repo)
    commit_all(repo)
    r = snodo_cli("run", "add a greeting module", "--json", cwd=repo)
    result = r.json()
    assert result["status"] == "completed", r
    assert not outside.exists()  # snodo's commit did not run it; the validator ran it confined
    judged = [r for e in events(repo, "validate") for r in e["data"]["results"] if r["validator_id"] == "hooks"]
    assert judged and judged[-1]["severity"] == "pass", judged
    assert "hook: checked the change" in json.dumps(judged), judged


def test_a_failing_pre_commit_hook_is_a_blocker_carrying_its_output(tmp_path: Path, snodo_cli) -> None:  # type: ignore[no-untyped-def]
    repo = make_repo(tmp_path / "repo")
    husky(repo, "echo 'lint: trailing whitespace in greeting.py' >&2\nexit 1\n")
    hooks_protocol(repo)
    commit_all(repo)
    r = snodo_cli("run", "add a greeting module", "--json", cwd=repo)
    result = r.json()
    assert result["status"] == "halted" and result["outcome"] == "blocker", r
    assert "lint: trailing whitespace in greeting.py" in r.stdout, r


def test_a_project_with_a_real_submodule_completes(tmp_path: Path, snodo_cli) -> None:  # type: ignore[no-untyped-def]
    repo = submodule_project(tmp_path)
    write_producer_protocol(repo)
    commit_all(repo)
    r = snodo_cli("run", "add a greeting module", "--json", cwd=repo)
    assert r.json()["status"] == "completed", r
    assert git(repo, "status", "--porcelain", "--", ".", ":(exclude).snodo").strip() == ""
