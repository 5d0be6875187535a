"""`snodo run --branch NAME`: completed work lands on the named branch; a name git refuses,
or one that exists, is refused before anything runs; `jobs prune` deletes a named branch
only when snodo made it and it is merged."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest

from tests.conftest import git, write_producer_protocol

FAILING = '{files: {"tests/test_no.py": "def test_no():\\n    assert False\\n"}}'


def events(repo: Path) -> list[dict]:  # type: ignore[type-arg]
    log = repo / ".git" / "snodo" / "audit.log"
    lines = log.read_text().splitlines() if log.exists() else []
    return [e for e in map(json.loads, lines) if e["event"] != "checkpoint"]


def said(stderr: str) -> list[str]:
    """What a command said besides the warning an uncommitted protocol gets."""
    return [line for line in stderr.strip().splitlines() if not line.startswith("warning: .snodo/protocol.yml")]


def heads(repo: Path) -> set[str]:
    return set(git(repo, "for-each-ref", "--format=%(refname:short)", "refs/heads").split())


def test_a_completed_run_leaves_the_named_branch(git_repo: Path, snodo_cli, snodo_home: Path) -> None:  # type: ignore[no-untyped-def]
    write_producer_protocol(git_repo)
    r = snodo_cli("run", "add a hello module", "--mock", "--branch", "feature/hello", "--json", cwd=git_repo)
    assert r.returncode == 0, r
    payload = r.json()
    assert payload["branch"] == "feature/hello" and payload["branch_named"] == "feature/hello"
    assert git(git_repo, "rev-parse", "feature/hello").strip() == payload["commit"]
    assert "hello.py" in git(git_repo, "ls-tree", "-r", "--name-only", "feature/hello")
    assert not [h for h in heads(git_repo) if h.startswith("snodo/")]  # the name replaces the default
    job = snodo_cli("jobs", "show", payload["job_id"], "--json", cwd=git_repo).json()
    assert job["branch"] == "feature/hello" and job["result"]["branch"] == "feature/hello"
    shown = snodo_cli("jobs", "show", payload["job_id"], cwd=git_repo).stdout
    assert f"branch    feature/hello @ {payload['commit']}" in shown
    (completed,) = [e for e in events(git_repo) if e["event"] == "completed"]
    assert completed["data"]["branch"] == "feature/hello" and completed["data"]["commit"] == payload["commit"]
    # The human table names it too.
    human = snodo_cli("run", "add a greet module", "--mock", "--branch", "feature/greet", cwd=git_repo)
    assert human.returncode == 0, human
    assert "feature/greet @ " in human.stdout


@pytest.mark.parametrize("name", ["bad..name", "-x", "@{-1}", "HEAD", "a b", "x.lock", "ends/", "new\nline"])
def test_an_invalid_name_is_refused_before_anything_runs(
    git_repo: Path, snodo_cli, snodo_home: Path, name: str
) -> None:  # type: ignore[no-untyped-def]
    write_producer_protocol(git_repo)
    before = heads(git_repo)
    r = snodo_cli("run", "add a hello module", "--mock", "--branch", name, cwd=git_repo)
    assert r.returncode == 4, r
    assert "not a valid branch name" in r.stderr and "\x1b" not in r.stderr
    assert "Traceback" not in r.stderr and len(said(r.stderr)) == 1, r.stderr
    _nothing_ran(git_repo, snodo_home, before)


def test_an_existing_branch_is_refused_and_left_as_it_is(git_repo: Path, snodo_cli, snodo_home: Path) -> None:  # type: ignore[no-untyped-def]
    write_producer_protocol(git_repo)
    git(git_repo, "branch", "taken")
    tip = git(git_repo, "rev-parse", "taken")
    before = heads(git_repo)
    r = snodo_cli("run", "add a hello module", "--mock", "--branch", "taken", "--json", cwd=git_repo)
    assert r.returncode == 4, r
    assert "already exists" in r.json()["error"], r  # with --json the error is the JSON reply
    assert git(git_repo, "rev-parse", "taken") == tip
    _nothing_ran(git_repo, snodo_home, before)
    # In the background too: refused before a job exists.
    bg = snodo_cli("run", "add a hello module", "--mock", "--branch", "taken", "--background", cwd=git_repo)
    assert bg.returncode == 4, bg
    _nothing_ran(git_repo, snodo_home, before)


def _nothing_ran(repo: Path, home: Path, heads_before: set[str]) -> None:
    assert heads(repo) == heads_before
    assert not (repo / ".git" / "snodo" / "jobs").exists() or not any(
        p.name.startswith("job-") for p in (repo / ".git" / "snodo" / "jobs").iterdir()
    )
    assert not any(e["event"] in ("run_started", "token_issued", "validate") for e in events(repo))
    worktrees = home / "worktrees"
    assert not worktrees.exists() or not any(worktrees.rglob(".git"))
    assert "worktree" not in git(repo, "worktree", "list", "--porcelain").replace(f"worktree {repo}", "", 1)


@pytest.mark.slow  # several governed runs
def test_a_background_job_keeps_the_name(git_repo: Path, snodo_cli) -> None:  # type: ignore[no-untyped-def]
    write_producer_protocol(git_repo)
    r = snodo_cli("run", "add a hello module", "--mock", "--branch", "bg/hello", "--background", "--json", cwd=git_repo)
    assert r.returncode == 0, r
    job_id = r.json()["job_id"]
    assert r.json()["branch_named"] == "bg/hello"
    assert snodo_cli("jobs", "show", job_id, "--json", cwd=git_repo).json()["branch"] == "bg/hello"
    # A second job may not claim the name while the first may still make it.
    again = snodo_cli("run", "add a hello module", "--mock", "--branch", "bg/hello", cwd=git_repo)
    assert again.returncode == 4, again
    deadline = time.monotonic() + 90
    while (job := snodo_cli("jobs", "show", job_id, "--json", cwd=git_repo).json())["status"] not in (
        "completed",
        "halted",
    ):
        assert time.monotonic() < deadline, job
        time.sleep(0.3)
    assert job["status"] == "completed", job
    assert git(git_repo, "rev-parse", "bg/hello").strip() == job["result"]["commit"]
    # The job's own --job path refuses another name for it.
    other = snodo_cli("run", "--job", job_id, "--branch", "elsewhere", cwd=git_repo)
    assert other.returncode == 4 and "another branch name" in other.stderr, other


@pytest.mark.slow  # several governed runs
def test_a_halted_run_makes_no_named_branch_and_resume_keeps_the_name(git_repo: Path, snodo_cli) -> None:  # type: ignore[no-untyped-def]
    write_producer_protocol(git_repo, coder_config=FAILING, tail="execution: {max_recovery_depth: 0}\n")
    r = snodo_cli("run", "add a failing test", "--branch", "feature/no", "--json", cwd=git_repo)
    assert r.returncode == 1, r
    payload = r.json()
    assert payload["status"] == "halted" and payload["branch"] is None and payload["branch_named"] == "feature/no"
    assert "feature/no" not in heads(git_repo)
    assert payload["halted_ref"].startswith("refs/snodo/halted/")
    shown = snodo_cli("jobs", "show", payload["job_id"], cwd=git_repo).stdout
    assert "branch    feature/no (not made: only completed work gets it)" in shown
    human = snodo_cli("run", "another failing test", "--branch", "feature/no2", cwd=git_repo)
    assert human.returncode == 1 and "feature/no2 not made" in human.stdout, human
    write_producer_protocol(git_repo)  # the cause fixed: the mock writes passing work
    resumed = snodo_cli("run", "--resume", payload["task_id"], "--mock", "--json", cwd=git_repo)
    assert resumed.returncode == 0, resumed
    assert resumed.json()["branch"] == "feature/no"
    assert git(git_repo, "rev-parse", "feature/no").strip() == resumed.json()["commit"]


@pytest.mark.slow  # several governed runs
def test_prune_deletes_a_named_branch_only_when_snodo_made_it(git_repo: Path, snodo_cli) -> None:  # type: ignore[no-untyped-def]
    write_producer_protocol(git_repo)
    git(git_repo, "add", ".snodo/protocol.yml")
    git(git_repo, "commit", "-q", "-m", "protocol")
    made = snodo_cli("run", "add a hello module", "--mock", "--branch", "feature/made", "--json", cwd=git_repo)
    moved = snodo_cli("run", "add a greet module", "--mock", "--branch", "feature/moved", "--json", cwd=git_repo)
    assert made.returncode == 0 and moved.returncode == 0, (made, moved)
    # A person's own branch, merged; and a named branch a person moved on before merging.
    git(git_repo, "branch", "mine")
    git(git_repo, "switch", "-q", "feature/moved")
    (git_repo / "extra.txt").write_text("mine\n")
    git(git_repo, "add", "extra.txt")
    git(git_repo, "commit", "-q", "-m", "a person's commit on the named branch")
    git(git_repo, "switch", "-q", "main")
    for branch in ("feature/made", "feature/moved"):
        git(git_repo, "merge", "-q", "--no-edit", branch)
    r = snodo_cli("jobs", "prune", "--json", cwd=git_repo)
    assert r.returncode == 0, r
    pruned = {b["branch"]: b["merged_into"] for b in r.json()["branches"]}
    assert pruned == {"feature/made": "main"}, r.json()
    assert {"mine", "feature/moved", "main"} <= heads(git_repo) and "feature/made" not in heads(git_repo)
