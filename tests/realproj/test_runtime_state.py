"""Runtime state (audit log, project state, jobs) lives in the repository's common git
directory: ordinary git commands do not destroy it, linked worktrees share it, a fresh clone
starts fresh, and what an older snodo kept in ``.snodo/`` is moved there once."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

from snodo.state.atomic import save_record
from snodo.state.audit import AuditLog
from snodo.state.sessions import ProjectState
from tests.conftest import CliResult, git, make_repo, write_producer_protocol

Cli = Callable[..., CliResult]


def _project(repo: Path, snodo_cli: Cli) -> Path:
    make_repo(repo)
    assert snodo_cli("init", "--json", cwd=repo).returncode == 0
    write_producer_protocol(repo)
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", "protocol")
    return repo


def _verify(snodo_cli: Cli, where: Path) -> dict[str, object]:
    found = snodo_cli("audit", "verify", "--json", cwd=where)
    assert found.returncode == 0, found
    data: dict[str, object] = found.json()
    return data


def test_git_clean_leaves_the_state_and_the_next_run_works(tmp_path: Path, snodo_cli: Cli) -> None:
    repo = _project(tmp_path / "repo", snodo_cli)
    assert sorted(p.name for p in (repo / ".snodo").iterdir()) == ["protocol.yml"]  # init writes no runtime there
    first = snodo_cli("run", "add a hello module", "--mock", "--json", cwd=repo)
    assert first.returncode == 0, first
    before = _verify(snodo_cli, repo)
    assert before["path"] == str(repo / ".git" / "snodo" / "audit.log")
    assert sorted(p.name for p in (repo / ".snodo").iterdir()) == ["protocol.yml"]
    assert git(repo, "status", "--porcelain") == ""  # nothing to ignore: the checkout stays clean

    git(repo, "clean", "-fdxq")
    again = snodo_cli("run", "add a hello module", "--mock", "--json", cwd=repo)
    assert again.returncode == 0, again
    after = _verify(snodo_cli, repo)
    assert isinstance(after["count"], int) and isinstance(before["count"], int) and after["count"] > before["count"]
    assert after["restarts"] == []
    jobs = snodo_cli("jobs", "list", "--json", cwd=repo)
    assert jobs.returncode == 0 and len(jobs.json()["jobs"]) == 2, jobs


def test_a_fresh_clone_starts_fresh_state(tmp_path: Path, snodo_cli: Cli) -> None:
    repo = _project(tmp_path / "repo", snodo_cli)
    assert snodo_cli("run", "add a hello module", "--mock", "--json", cwd=repo).returncode == 0
    clone = tmp_path / "clone"
    git(tmp_path, "clone", "-q", str(repo), str(clone))
    assert not (clone / ".git" / "snodo").exists()
    jobs = snodo_cli("jobs", "list", "--json", cwd=clone)
    assert jobs.returncode == 0 and jobs.json()["jobs"] == [], jobs
    assert snodo_cli("validate", "add a module", "--json", cwd=clone).returncode == 0
    fresh = _verify(snodo_cli, clone)
    assert fresh["path"] == str(clone / ".git" / "snodo" / "audit.log") and fresh["restarts"] == []
    events = snodo_cli("audit", "show", "--json", cwd=clone).json()["events"]
    assert events[0]["seq"] == 0 and not any(e["event"] == "dispatch" for e in events)


def test_a_linked_worktree_shares_the_main_checkouts_log(tmp_path: Path, snodo_cli: Cli) -> None:
    repo = _project(tmp_path / "repo", snodo_cli)
    assert snodo_cli("validate", "add a module", "--json", cwd=repo).returncode == 0
    linked = tmp_path / "linked"
    git(repo, "worktree", "add", "-q", "-b", "side", str(linked))
    shared = _verify(snodo_cli, linked)
    assert shared["path"] == str(repo / ".git" / "snodo" / "audit.log")
    validated = snodo_cli("validate", "add another module", "--json", cwd=linked)
    assert validated.returncode == 0, validated
    tasks = [
        e["data"].get("task_id")
        for e in snodo_cli("audit", "show", "--event", "validate", "--json", cwd=repo).json()["events"]
    ]
    assert len(set(tasks)) == 2  # both checkouts' validations, in one log
    assert _verify(snodo_cli, repo)["count"] == _verify(snodo_cli, linked)["count"]


def test_a_project_outside_git_is_refused_with_the_reason(tmp_path: Path, snodo_cli: Cli) -> None:
    plain = tmp_path / "plain"
    plain.mkdir()
    made = snodo_cli("init", "--json", cwd=plain)
    assert made.returncode == 0 and made.json()["git_repository"] is False, made
    assert sorted(p.name for p in (plain / ".snodo").iterdir()) == ["protocol.yml"]
    for args in (("validate", "add a module"), ("audit", "verify"), ("jobs", "list")):
        refused = snodo_cli(*args, cwd=plain)
        said = " ".join(refused.stderr.split())
        assert refused.returncode == 4, (args, refused)
        assert "is not a git repository" in said and "git init" in said and "Traceback" not in said, refused
    assert sorted(p.name for p in (plain / ".snodo").iterdir()) == ["protocol.yml"]


def _old_layout(repo: Path, home: Path) -> tuple[AuditLog, int]:
    """What an older snodo left in ``.snodo/``: a signed log (its checkpoint in the home,
    keyed by that path), the project state, a job and a proposal."""
    old = repo / ".snodo"
    log = AuditLog(old / "audit.log", home=home)
    for n in range(3):
        log.append("validate", mode="producer", data={"task_id": f"task-{n}"})
    save_record(old / "state.json", ProjectState(current_mode="producer", active_sessions=()))
    (old / "jobs" / "job-1").mkdir(parents=True)
    (old / "jobs" / "job-1" / "spec.md").write_text("old job\n")
    (old / "jobs" / "job-1" / "status.json").write_text(
        json.dumps({"job_id": "job-1", "status": "completed", "spec": "old job"})
    )
    (old / "proposals").mkdir()
    (old / "proposals" / "dec-1-1.json").write_text("{}\n")
    (old / "state.json.lock").write_text("")
    return log, log.verify().count


def test_an_older_projects_state_is_moved_once(tmp_path: Path, snodo_cli: Cli, snodo_home: Path) -> None:
    repo = _project(tmp_path / "repo", snodo_cli)
    (repo / ".git" / "snodo" / "state.json").unlink()  # as an older snodo's init left it: nothing here
    old_log, count = _old_layout(repo, snodo_home)
    old_bytes = old_log.path.read_bytes()

    first = _verify_with_note(snodo_cli, repo)
    new = repo / ".git" / "snodo"
    assert first["path"] == str(new / "audit.log") and first["count"] == count
    assert (new / "audit.log").read_bytes() == old_bytes
    assert (new / "jobs" / "job-1" / "spec.md").read_text() == "old job\n"
    assert (new / "proposals" / "dec-1-1.json").is_file()
    assert json.loads((new / "state.json").read_text())["current_mode"] == "producer"
    left = sorted(p.name for p in (repo / ".snodo").iterdir())
    assert left == ["audit.log.lock", "protocol.yml", "state.json.lock"]  # the older snodo's: never deleted
    second = snodo_cli("audit", "verify", "--json", cwd=repo)
    assert second.returncode == 0 and "moved" not in second.stderr, second  # said once

    # the home's checkpoint moved with the log: a rollback of the moved log is still seen
    signed_prefix = b"".join(old_bytes.splitlines(keepends=True)[:2])  # the first append and its checkpoint
    assert AuditLog(tmp_path / "copy.log", home=snodo_home).path.write_bytes(signed_prefix)
    assert AuditLog(tmp_path / "copy.log", home=snodo_home).verify().ok  # valid by itself: only the home knows
    (new / "audit.log").write_bytes(signed_prefix)
    broken = snodo_cli("audit", "verify", "--json", cwd=repo)
    assert broken.returncode == 1 and "removed" in broken.json()["reason"], broken


def _verify_with_note(snodo_cli: Cli, repo: Path) -> dict[str, object]:
    found = snodo_cli("audit", "verify", "--json", cwd=repo)
    assert found.returncode == 0, found
    said = " ".join(found.stderr.split())
    assert "moved snodo's runtime state" in said and "audit.log" in said and "jobs/" in said, found.stderr
    data: dict[str, object] = found.json()
    return data


def test_state_in_both_places_is_refused_and_left_alone(tmp_path: Path, snodo_cli: Cli, snodo_home: Path) -> None:
    repo = _project(tmp_path / "repo", snodo_cli)
    assert snodo_cli("validate", "add a module", "--json", cwd=repo).returncode == 0
    new_log = repo / ".git" / "snodo" / "audit.log"
    new_bytes = new_log.read_bytes()
    old_log, _ = _old_layout(repo, snodo_home)
    old_bytes = old_log.path.read_bytes()

    refused = snodo_cli("validate", "add a module", cwd=repo)
    said = " ".join(refused.stderr.split())
    assert refused.returncode == 4, refused
    assert "two places" in said and str(old_log.path) in said and str(new_log) in said, refused.stderr
    assert new_log.read_bytes() == new_bytes and old_log.path.read_bytes() == old_bytes

    # the person keeps the current log and state: the older ones moved aside, the rest moves in
    old_log.path.rename(tmp_path / "old-audit.log")
    still = snodo_cli("validate", "add a module", cwd=repo)
    assert still.returncode == 4 and "state.json" in still.stderr, still  # each file its own conflict
    (repo / ".snodo" / "state.json").rename(tmp_path / "old-state.json")
    moved = snodo_cli("validate", "add a module", "--json", cwd=repo)
    assert moved.returncode == 0, moved
    assert (repo / ".git" / "snodo" / "jobs" / "job-1" / "spec.md").is_file()
    assert _verify(snodo_cli, repo)["restarts"] == []
