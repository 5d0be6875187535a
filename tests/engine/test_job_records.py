"""Queued jobs hold no process (issue 26.4): a job waiting for a slot is a record; the job
that finishes starts the next; a full queue refuses a new job and creates nothing. Real
``python -I -m snodo run --job`` processes, counted from /proc."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest

from snodo.engine.jobs import JobStore, QueueFull
from tests.conftest import busy_job_slot, git, write_producer_protocol

SUITE = json.dumps(
    {"files": {"src/w.py": "X = 1\n", "tests/test_w.py": "import time\n\ndef test_w():\n    time.sleep(1)\n"}}
)


def _job_processes(ids: list[str]) -> list[str]:
    """The job ids that have a live ``snodo run --job`` process right now."""
    alive = []
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit():
            continue
        try:
            argv = (proc / "cmdline").read_bytes().split(b"\0")
            state = (proc / "stat").read_text().split(")")[-1].split()[0]
        except OSError:
            continue
        if state != "Z" and b"--job" in argv:
            alive += [i for i in ids if i.encode() in argv]
    return alive


@pytest.mark.slow
def test_a_burst_leaves_one_process_per_slot_and_a_full_queue_refuses(git_repo: Path, snodo_cli) -> None:  # type: ignore[no-untyped-def]
    write_producer_protocol(
        git_repo, coder_config=SUITE, tail="execution: {max_parallel_jobs: 1, max_queued_jobs: 3}\n"
    )
    git(git_repo, "add", ".snodo/protocol.yml")
    git(git_repo, "commit", "-qm", "protocol")
    ids = []
    store = JobStore(git_repo)
    # the one slot is busy while the burst arrives (as if a job held it), so on any machine
    # the first job's process waits for it and the other three can only be records
    with busy_job_slot(git_repo):
        for n in range(4):
            r = snodo_cli("run", f"burst task {n}", "--background", "--json", cwd=git_repo)
            assert r.returncode == 0, r
            ids.append(r.json()["job_id"])
        waiting = [j["job_id"] for j in store.waiting()]
        assert waiting == ids[1:] and not any(store.load(i).get("pid") for i in waiting)  # records, no process
        assert len(set(_job_processes(ids))) <= 1
        refused = snodo_cli("run", "one too many", "--background", "--json", cwd=git_repo)
        assert refused.returncode != 0 and "queue is full" in refused.stdout + refused.stderr, refused
        assert len(store.list()) == 4  # nothing was created for the refused one
        with pytest.raises(QueueFull):
            store.check_room(3)

    most = 0
    deadline = time.monotonic() + 240
    while time.monotonic() < deadline:
        # distinct unfinished jobs with a process (a finished job's process may linger a moment
        # while it starts the next; a launcher and the job it forks are one job)
        live = {i for i in _job_processes(ids) if store.load(i)["status"] not in ("completed", "halted")}
        most = max(most, len(live))
        if all(store.load(i)["status"] in ("completed", "halted") for i in ids):
            break
        time.sleep(0.05)
    assert [store.load(i)["status"] for i in ids] == ["completed"] * 4, [store.load(i) for i in ids]
    assert most <= 1  # max_parallel_jobs: the others waited as records
    assert "waiting for a slot" in store.log_path(ids[-1]).read_text()
