"""Bounded jobs: at most execution.max_parallel_jobs background jobs run at once, the rest
wait `queued`, oldest first; and `snodo jobs prune` removes exactly what is past its age."""

from __future__ import annotations

import json
import os
import shutil
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from snodo.base.errors import SnodoError
from snodo.engine.jobs import JobStore
from snodo.engine.lifecycle import parse_duration
from snodo.engine.worktree import project_key
from tests.conftest import busy_job_slot, git, write_producer_protocol

SUITE = json.dumps(
    {
        "files": {
            "src/wait.py": "X = 1\n",
            "tests/test_wait.py": "import time\n\ndef test_wait():\n    time.sleep(2)\n",
        }
    }
)


def write_protocol(repo: Path, parallel: int) -> None:
    write_producer_protocol(repo, coder_config=SUITE, tail=f"execution: {{max_parallel_jobs: {parallel}}}\n")
    git(repo, "add", ".snodo/protocol.yml")
    git(repo, "commit", "-qm", "protocol")


@pytest.mark.slow
def test_background_jobs_beyond_the_limit_wait_queued(git_repo: Path, snodo_cli) -> None:  # type: ignore[no-untyped-def]
    write_protocol(git_repo, parallel=1)
    ids = []
    # the slot is busy while the three arrive, so they queue however slow the machine is
    with busy_job_slot(git_repo):
        for n in range(3):
            r = snodo_cli("run", f"task number {n}", "--background", "--json", cwd=git_repo)
            assert r.returncode == 0, r
            ids.append(r.json()["job_id"])
    store = JobStore(git_repo)
    most_running = 0
    seen_queued_while_running = False
    order: list[str] = []
    deadline = time.monotonic() + 240
    while time.monotonic() < deadline:
        jobs = {j["job_id"]: j for j in store.list()}
        running = [i for i in ids if jobs[i]["status"] == "running"]
        queued = [i for i in ids if jobs[i]["status"] == "queued"]
        most_running = max(most_running, len(running))
        seen_queued_while_running |= bool(running and queued)
        order += [i for i in running if i not in order]
        if all(jobs[i]["status"] in ("completed", "halted") for i in ids):
            break
        time.sleep(0.05)
    assert [store.load(i)["status"] for i in ids] == ["completed"] * 3, [store.load(i) for i in ids]
    assert most_running == 1 and seen_queued_while_running
    assert order == ids  # oldest first
    for job_id in ids[1:]:
        assert "waiting for a slot" in store.log_path(job_id).read_text()


def test_two_slots_let_two_jobs_run_together(git_repo: Path, snodo_cli) -> None:  # type: ignore[no-untyped-def]
    write_protocol(git_repo, parallel=2)
    ids = [
        snodo_cli("run", f"task number {n}", "--background", "--json", cwd=git_repo).json()["job_id"] for n in range(2)
    ]
    store = JobStore(git_repo)
    together = False
    deadline = time.monotonic() + 180
    while time.monotonic() < deadline:
        statuses = [store.load(i)["status"] for i in ids]
        together |= statuses == ["running", "running"]
        if all(s in ("completed", "halted") for s in statuses):
            break
        time.sleep(0.05)
    assert together and [store.load(i)["status"] for i in ids] == ["completed"] * 2


# ------------------------------------------------------------------ prune


def _age_job(store: JobStore, job_id: str, days: int) -> None:
    path = store.path(job_id) / "status.json"
    status = json.loads(path.read_text())
    status["updated_at"] = (datetime.now(UTC) - timedelta(days=days)).isoformat(timespec="seconds")
    path.write_text(json.dumps(status))


def _halted_ref(repo: Path, name: str, days: int) -> str:
    stamp = int((datetime.now(UTC) - timedelta(days=days)).timestamp())
    tree = git(repo, "write-tree").strip()
    env = {**os.environ, "GIT_COMMITTER_DATE": f"{stamp} +0000", "GIT_AUTHOR_DATE": f"{stamp} +0000"}
    import subprocess

    commit = subprocess.run(
        ["git", "-C", str(repo), "commit-tree", tree, "-p", "HEAD", "-m", name],
        env=env,
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
    ref = f"refs/snodo/halted/task-{name}/run{name}"
    git(repo, "update-ref", ref, commit)
    return ref


def test_prune_removes_exactly_what_is_past_its_age(git_repo: Path, snodo_home: Path, snodo_cli) -> None:  # type: ignore[no-untyped-def]
    assert snodo_cli("init", cwd=git_repo).returncode == 0
    store = JobStore(git_repo)
    old_job = store.create(spec="old", task_id="task-old", mode="producer", coder="mock", background=False)
    new_job = store.create(spec="new", task_id="task-new", mode="producer", coder="mock", background=False)
    live_job = store.create(spec="live", task_id="task-live", mode="producer", coder="mock", background=True)
    for job in (old_job, new_job):
        store.update(job["job_id"], status="halted", outcome="blocker")
    store.update(live_job["job_id"], status="running", pid=os.getpid())
    _age_job(store, old_job["job_id"], 20)
    _age_job(store, new_job["job_id"], 3)
    _age_job(store, live_job["job_id"], 30)  # a live job is never pruned, however old
    old_ref = _halted_ref(git_repo, "old", 20)
    new_ref = _halted_ref(git_repo, "new", 3)
    # A leftover working copy no run holds (no lock), 20 days old; and a fresh one.
    directory = snodo_home / "worktrees" / project_key(git_repo)
    directory.mkdir(parents=True)
    for name, days in (("oldcopy1", 20), ("newcopy1", 1)):
        (directory / name).mkdir()
        (directory / name / "f.py").write_text("x = 1\n")
        stamp = time.time() - days * 86400
        os.utime(directory / name, (stamp, stamp))

    r = snodo_cli("jobs", "prune", "--json", cwd=git_repo)
    assert r.returncode == 0, r
    removed = r.json()
    assert removed["older_than_seconds"] == 14 * 86400
    assert removed["halted_refs"] == [old_ref]
    assert removed["jobs"] == [old_job["job_id"]]
    assert [w["run_id"] for w in removed["worktrees"]] == ["oldcopy1"]
    remaining = git(git_repo, "for-each-ref", "--format=%(refname)", "refs/snodo/").split()
    assert remaining == [new_ref]
    assert sorted(p.name for p in store.directory.iterdir() if not p.name.startswith(".")) == sorted(
        [new_job["job_id"], live_job["job_id"]]
    )
    assert sorted(p.name for p in directory.iterdir()) == ["newcopy1"]

    r = snodo_cli("jobs", "prune", "--older-than", "2d", cwd=git_repo)
    assert r.returncode == 0, r
    assert f"removed halted ref   {new_ref}" in r.stdout and f"removed job          {new_job['job_id']}" in r.stdout
    assert live_job["job_id"] not in r.stdout
    again = snodo_cli("jobs", "prune", "--older-than", "2d", cwd=git_repo)
    assert "nothing to prune" in again.stdout
    audit = [json.loads(line) for line in (git_repo / ".snodo" / "audit.log").read_text().splitlines()]
    pruned = [e["data"] for e in audit if e["event"] == "pruned"]
    assert pruned[0] == {
        "halted_refs": [old_ref],
        "jobs": [old_job["job_id"]],
        "worktrees": ["oldcopy1"],
        "branches": [],
    }
    assert len(pruned) == 2  # the run that found nothing records nothing
    assert snodo_cli("audit", "verify", cwd=git_repo).returncode == 0
    shutil.rmtree(directory)


def test_durations() -> None:
    assert parse_duration("14d") == timedelta(days=14)
    assert parse_duration("12h") == timedelta(hours=12)
    assert parse_duration("30m") == timedelta(minutes=30)
    assert parse_duration("90s") == timedelta(seconds=90)
    assert parse_duration("2w") == timedelta(weeks=2)
    assert parse_duration("3") == timedelta(days=3)
    for bad in ("", "d", "1y", "-1d", "1.5d"):
        with pytest.raises(SnodoError, match="not a duration"):
            parse_duration(bad)


def test_a_job_status_or_outcome_outside_the_known_ones_is_refused(git_repo: Path) -> None:
    store = JobStore(git_repo)
    job_id = str(store.create(spec="s", task_id="t", mode="dev", coder=None, background=True)["job_id"])
    with pytest.raises(SnodoError, match="not a job status"):
        store.update(job_id, status="done")
    with pytest.raises(SnodoError, match="not a halt outcome"):
        store.update(job_id, status="halted", outcome="pass")
    assert store.load(job_id)["status"] == "queued"
    assert store.update(job_id, status="halted", outcome="interrupted")["outcome"] == "interrupted"
