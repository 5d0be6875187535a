"""Reused working copies (issue 27): what one run leaves in its copy — confined, under each
backend — is gone before the next run in the same slot starts, and concurrent runs never
share a copy. Everything goes through the real CLI, real git and the real sandbox."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from snodo.engine import pool
from snodo.engine.worktree import create_worktree, project_key
from tests.conftest import git, make_repo

#: Run as a post_execute validator, confined: first report what an earlier run left (and
#: fail if anything), then leave all of it behind for the next run. (A nested repository
#: made by confined code is refused outright, tests/sandbox/test_attacks_git*.py; the pool's
#: own removal of nested repositories is test_a_reused_copy_holds_no_leftover_and_no_history.)
DIRTY = """\
set -u
seen=""
[ -e left.txt ] && seen="$seen untracked"
[ -e build/artefact.o ] && seen="$seen ignored"
[ -e nested ] && seen="$seen nested-dir"
[ -e locked ] && seen="$seen chmod-000-dir"
[ -x tool.sh ] && seen="$seen exec-bit"
[ -w README.md ] || seen="$seen read-only-file"
[ "$(cat README.md)" = "# project" ] || seen="$seen changed-file"
if [ -n "$seen" ]; then echo "SEEN:$seen"; exit 1; fi
echo leftover > left.txt
mkdir -p build && echo obj > build/artefact.o
mkdir -p nested/deeper && echo x > nested/deeper/inner.txt
mkdir -p locked/inside && echo x > locked/inside/f && chmod 000 locked
chmod 755 tool.sh
echo changed >> README.md
chmod 444 README.md
"""

PROTOCOL = """\
protocol_id: t
name: t
modes:
  - mode_id: producer
    tools: [read, edit, validate, dispatch, commit]
    validators: [pre, dirty]
    coder: mock
validators:
  - {validator_id: pre, validator_type: command, tooling: {command: "true"}}
  - {validator_id: dirty, validator_type: command, evaluation_phase: post_execute, tooling: {command: "sh dirty.sh"}}
"""


def _project(tmp_path: Path) -> Path:
    repo = make_repo(tmp_path / "repo")
    (repo / ".snodo").mkdir()
    (repo / ".snodo" / "protocol.yml").write_text(PROTOCOL)
    (repo / "dirty.sh").write_text(DIRTY)
    (repo / "tool.sh").write_text("echo tool\n")
    (repo / ".gitignore").write_text("build/\n")
    git(repo, "add", "-A")
    git(repo, "commit", "-qm", "project")
    return repo


def _run(repo: Path, spec: str) -> dict:  # type: ignore[type-arg]
    done = subprocess.run(
        [sys.executable, "-I", "-m", "snodo", "run", spec, "--json"], cwd=repo, capture_output=True, text=True
    )
    payload: dict = json.loads(done.stdout)  # type: ignore[type-arg]
    return payload


def _copy_of(repo: Path, payload: dict) -> str:  # type: ignore[type-arg]
    log = (repo / ".snodo" / "jobs" / payload["job_id"] / "log.txt").read_text()
    return next(line.split()[2] for line in log.splitlines() if line.startswith("working copy "))


def test_the_next_run_in_the_same_slot_sees_nothing_of_the_last(tmp_path: Path, backend: str) -> None:
    repo = _project(tmp_path)
    first = _run(repo, "add a hello module")
    second = _run(repo, "add a hello module again")
    for payload in (first, second):
        dirty = next(v for v in payload["validators"] if v["validator_id"] == "dirty")
        assert dirty["severity"] == "pass", dirty
    # Reused, not re-created: the same copy, restored in place.
    assert _copy_of(repo, first) == _copy_of(repo, second)
    assert first["status"] == second["status"] == "completed", (first, second)
    # The first run's commit is on its branch, not in the copy's history for the next one.
    copy = Path(_copy_of(repo, second))
    assert git(copy, "reflog").count("\n") <= 2


def test_a_copy_that_cannot_be_restored_is_replaced(tmp_path: Path, snodo_home: Path) -> None:
    repo = _project(tmp_path)
    wt = create_worktree(repo, snodo_home, "t1", "run00001")
    (wt.path / ".git").chmod(0o644)
    (wt.path / ".git").write_text("gitdir: /elsewhere\n")  # the copy no longer names its own git directory
    wt.remove()
    again = create_worktree(repo, snodo_home, "t2", "run00002")
    try:
        # the slot is usable again: its .git names its own git directory, not the planted one
        assert again.path == wt.path and "/elsewhere" not in (again.path / ".git").read_text()
        assert git(again.path, "status", "--porcelain", "--ignored") == ""
    finally:
        again.remove()


def test_concurrent_runs_never_share_a_copy_and_an_idle_copy_is_dropped(tmp_path: Path, snodo_home: Path) -> None:
    repo = _project(tmp_path)
    held = [create_worktree(repo, snodo_home, f"t{i}", f"run0000{i}") for i in range(3)]
    assert len({w.path for w in held}) == 3
    # Another process gets a copy of its own while these are held.
    code = (
        "import sys; from pathlib import Path; from snodo.engine.worktree import create_worktree;"
        f"w = create_worktree(Path({str(repo)!r}), Path({str(snodo_home)!r}), 'other', 'run00009');"
        "print(w.path); w.remove()"
    )
    other = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.strip()
    assert Path(other) not in {w.path for w in held}
    for w in held:
        w.remove()
    base = snodo_home / "worktrees" / project_key(repo)
    assert pool.drop_idle(repo, base, older_than=pool.IDLE_TTL) == []  # used just now
    assert sorted(pool.drop_idle(repo, base, older_than=pool.timedelta(0))) == [f"slot-{n}" for n in range(4)]
    assert git(repo, "worktree", "list", "--porcelain").count("worktree ") == 1


@pytest.mark.parametrize("attack", ["rename-parent"])
def test_a_protected_path_cannot_be_replaced_by_renaming_its_parent(tmp_path: Path, backend: str, attack: str) -> None:
    from snodo.process.runner import run_process
    from snodo.sandbox import SandboxPolicy

    ws = make_repo(tmp_path / "ws")
    (ws / "config").mkdir()
    (ws / "config" / "prod.yml").write_text("real\n")
    (ws / "config" / "other.yml").write_text("free\n")
    git(ws, "add", "-A")
    git(ws, "commit", "-qm", "config")
    script = (
        "mv config config.orig; mkdir -p config; echo evil > config/prod.yml; "
        "echo edited > config/other.yml; cat config/prod.yml"
    )
    policy = SandboxPolicy(workspace=ws, read_only=("config/prod.yml",))
    run_process(["sh", "-c", script], cwd=ws, timeout=30, sandbox=policy)
    assert (ws / "config" / "prod.yml").read_text() == "real\n"
    assert not (ws / "config.orig").exists()


def test_jobs_prune_and_session_close_drop_the_idle_copies(tmp_path: Path, snodo_home: Path, snodo_cli) -> None:  # type: ignore[no-untyped-def]
    repo = _project(tmp_path)
    copies = snodo_home / "worktrees" / project_key(repo) / "pool"
    assert _run(repo, "add a hello module")["status"] == "completed"
    assert [p.name for p in copies.iterdir()] == ["slot-0"]
    kept = snodo_cli("jobs", "prune", "--json", cwd=repo).json()  # used just now: kept
    assert kept["worktrees"] == [] and [p.name for p in copies.iterdir()] == ["slot-0"]
    pruned = snodo_cli("jobs", "prune", "--older-than", "0s", "--json", cwd=repo).json()
    assert [w["run_id"] for w in pruned["worktrees"]] == ["slot-0"] and not any(copies.iterdir())

    assert _run(repo, "add a hello module again")["status"] == "completed"
    assert snodo_cli("session", "close", cwd=repo).returncode == 0
    assert not any(copies.iterdir())
    assert git(repo, "worktree", "list", "--porcelain").count("worktree ") == 1


def test_a_reused_copy_holds_no_leftover_and_no_history(tmp_path: Path, snodo_home: Path) -> None:
    import os

    repo = _project(tmp_path)
    base = git(repo, "rev-parse", "HEAD").strip()
    wt = create_worktree(repo, snodo_home, "t1", "run00001")
    inode = wt.path.stat().st_ino
    (wt.path / "new.txt").write_text("committed by the run\n")
    git(wt.path, "add", "new.txt")
    git(wt.path, "-c", "user.name=a", "-c", "user.email=a@a", "commit", "-qm", "run work")
    tip = git(wt.path, "rev-parse", "HEAD").strip()
    (wt.path / "untracked.txt").write_text("x\n")
    (wt.path / "build").mkdir()
    (wt.path / "build" / "a.o").write_text("obj\n")
    os.mkfifo(wt.path / "pipe")  # git never lists a fifo: the mode scan removes it
    git(wt.path / "build", "init", "-q")  # a nested repository inside an ignored directory
    (wt.path / "sub").mkdir()
    git(wt.path / "sub", "init", "-q")
    wt.remove()

    again = create_worktree(repo, snodo_home, "t2", "run00002")
    try:
        assert again.path == wt.path and again.path.stat().st_ino == inode  # reused in place
        assert git(again.path, "status", "--porcelain", "--ignored", "--untracked-files=all") == ""
        assert sorted(p.name for p in again.path.iterdir()) == sorted(
            [*git(repo, "ls-tree", "--name-only", base).split(), ".git"]
        )
        assert git(again.path, "rev-parse", "HEAD").strip() == base
        assert tip not in git(again.path, "reflog", "--format=%H")
        probe = subprocess.run(
            ["git", "-C", str(again.path), "rev-parse", "-q", "--verify", "ORIG_HEAD"], capture_output=True
        )
        assert probe.returncode != 0
    finally:
        again.remove()
