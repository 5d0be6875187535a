"""What a run leaves behind: a branch only for completed work, halted commits under
refs/snodo/halted/, nothing at all of work that held a secret, no worktree of a killed run."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path

import pytest

from snodo.engine.worktree import project_key, reclaim_abandoned
from tests.conftest import BROKEN_BY_HELLO, NO_SECRETS, git, make_repo, write_producer_protocol

# A well-formed AWS access key id that is not anyone's (AWS documents this exact shape).
SECRET = "AKIA" + "Q7ZT4NEXAMPLE2K5"


def events(repo: Path) -> list[dict]:  # type: ignore[type-arg]
    return [json.loads(line) for line in (repo / ".git" / "snodo" / "audit.log").read_text().splitlines()]


def write_protocol(repo: Path, *, coder_config: str = "{}", extra: str = "") -> None:
    write_producer_protocol(repo, coder_config=coder_config, tail=NO_SECRETS + extra)


def refs(repo: Path) -> list[str]:
    return git(repo, "for-each-ref", "--format=%(refname)").split()


def secret_config() -> str:
    files = {
        "src/cloud.py": f'ACCESS_KEY_ID = "{SECRET}"\n',
        "tests/test_cloud.py": "from src.cloud import ACCESS_KEY_ID\n\ndef test_key():\n    assert ACCESS_KEY_ID\n",
    }
    return json.dumps({"files": files})


def test_secret_halt_keeps_no_commit_holding_the_secret(git_repo: Path, snodo_home: Path, snodo_cli) -> None:  # type: ignore[no-untyped-def]
    write_protocol(git_repo, coder_config=secret_config())
    r = snodo_cli("run", "add the cloud settings", "--json", cwd=git_repo)
    assert r.returncode == 1, r
    payload = r.json()
    assert payload["status"] == "halted" and payload["outcome"] == "blocker"
    assert payload["branch"] is None and payload["halted_ref"] is None and payload["commit"] is None
    discarded = payload["discarded"]
    assert discarded["files"] == ["src/cloud.py", "tests/test_cloud.py"]
    assert discarded["constraints"][0]["predicate"] == "no_secrets_in_diff"
    assert "src/cloud.py:1: matches the AWS access key id pattern" in discarded["constraints"][0]["finding"]
    assert discarded["commits"] == 1 and discarded["objects_deleted"] >= 3 and discarded["objects_left"] == 0

    # No ref, no reflog, no object of the repository holds the secret.
    assert not [ref for ref in refs(git_repo) if "snodo" in ref]
    for args in (("log", "--all", "-p"), ("log", "--reflog", "-p"), ("log", "-g", "-p", "--all")):
        assert SECRET not in git(git_repo, *args)
    loose = subprocess.run(
        ["git", "-C", str(git_repo), "fsck", "--unreachable", "--no-reflogs"], capture_output=True, text=True
    ).stdout
    for line in loose.splitlines():
        sha = line.split()[-1]
        assert SECRET not in git(git_repo, "cat-file", "-p", sha)
    # The run's pooled working copy went back to the base: nothing of the work is left in it.
    (copy,) = (snodo_home / "worktrees" / project_key(git_repo) / "pool").iterdir()
    assert git(copy, "status", "--porcelain", "--ignored") == ""
    assert all(SECRET not in f.read_text() for f in copy.rglob("*.py"))
    assert SECRET not in git(copy, "log", "-g", "-p", "--all")

    # The job record and the audit say what was discarded: names and kinds, never the value.
    job = snodo_cli("jobs", "show", payload["job_id"], "--json", cwd=git_repo).json()
    assert job["result"]["discarded"]["files"] == ["src/cloud.py", "tests/test_cloud.py"]
    audit = (git_repo / ".git" / "snodo" / "audit.log").read_text()
    jobs_dir = (git_repo / ".git" / "snodo" / "jobs" / payload["job_id"]).iterdir()
    assert SECRET not in audit and all(SECRET not in p.read_text() for p in jobs_dir)
    dropped = [e["data"] for e in events(git_repo) if e["event"] == "work_discarded"]
    assert len(dropped) == 1 and dropped[0]["files"] == ["src/cloud.py", "tests/test_cloud.py"]
    assert "AWS access key id" in dropped[0]["constraints"][0]["finding"]
    halt = [e["data"] for e in events(git_repo) if e["event"] == "halt"][-1]
    assert halt["discarded"] is True and halt["halted_ref"] is None
    shown = snodo_cli("jobs", "show", payload["job_id"], cwd=git_repo)
    assert "discarded" in shown.stdout and "src/cloud.py" in shown.stdout and SECRET not in shown.stdout
    assert snodo_cli("audit", "verify", cwd=git_repo).returncode == 0


def test_halted_and_resumed_runs_create_no_branch(git_repo: Path, snodo_cli) -> None:  # type: ignore[no-untyped-def]
    (git_repo / "tests").mkdir()
    (git_repo / "tests" / "test_legacy.py").write_text(BROKEN_BY_HELLO)
    git(git_repo, "add", "tests")
    git(git_repo, "commit", "-q", "-m", "a failing test")
    write_protocol(git_repo)
    first = snodo_cli("run", "add a hello module", "--mock", "--json", cwd=git_repo)
    assert first.returncode == 1 and first.json()["outcome"] == "blocker", first
    task_id = first.json()["task_id"]
    resumed = snodo_cli("run", "--resume", task_id, "--json", cwd=git_repo)
    assert resumed.returncode == 1, resumed
    assert not [ref for ref in refs(git_repo) if ref.startswith("refs/heads/snodo/")]
    kept = sorted(ref for ref in refs(git_repo) if ref.startswith("refs/snodo/halted/"))
    assert len(kept) == 2
    assert {first.json()["halted_ref"], resumed.json()["halted_ref"]} == set(kept)
    for ref in kept:
        assert ref.startswith(f"refs/snodo/halted/{task_id}/")
        assert "hello.py" in git(git_repo, "show", "--stat", ref)
    assert "snodo" not in git(git_repo, "branch", "--list", "--all")

    shown = snodo_cli("jobs", "show", first.json()["job_id"], cwd=git_repo)
    assert shown.returncode == 0
    text = " ".join(shown.stdout.split())
    ref = first.json()["halted_ref"]
    assert f"git show {ref}" in text and f"git diff HEAD...{ref}" in text and "git branch NAME " + ref in text

    # Fixing the suite and running again completes: that run, and only it, gets a branch.
    (git_repo / "tests" / "test_legacy.py").write_text("def test_legacy():\n    assert True\n")
    git(git_repo, "commit", "-qam", "fix the suite")
    done = snodo_cli("run", "add a hello module", "--mock", "--json", cwd=git_repo)
    assert done.returncode == 0, done
    heads = [ref for ref in refs(git_repo) if ref.startswith("refs/heads/snodo/")]
    assert heads == [f"refs/heads/{done.json()['branch']}"]


def kill_mid_run(repo: Path, home: Path, marker: str) -> str:
    """Start `snodo run`, SIGKILL it and its children while its tests run; return the run
    id its pooled working copy's lock still names."""
    env = {**os.environ, "SNODO_HOME": str(home)}
    proc = subprocess.Popen(
        [sys.executable, "-m", "snodo", "run", "slow work", "--json"],
        cwd=repo,
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )
    directory = home / "worktrees" / project_key(repo)
    deadline = time.monotonic() + 90
    while time.monotonic() < deadline:  # wait until the slow test is running in the worktree
        assert proc.poll() is None
        if directory.is_dir() and any(directory.glob("pool.locks/*.lock")) and _slow_test_running(marker):
            break
        time.sleep(0.2)
    else:
        pytest.fail("the run never reached its post_execute tests")
    os.killpg(proc.pid, signal.SIGKILL)  # the run and its pytest child, as an OOM killer would
    proc.wait()
    (lock,) = directory.glob("pool.locks/*.lock")
    run_id: str = json.loads(lock.read_text())["run_id"]
    return run_id


def slow_config(marker: str, secret: bool = False) -> str:
    files = {
        "src/slow.py": f'KEY = "{SECRET}"\n' if secret else "X = 1\n",
        # The marker says the post_execute tests run (the commit is made): the moment to kill.
        "tests/test_slow.py": (
            f"import pathlib, time\n\ndef test_slow():\n    pathlib.Path({marker!r}).touch()\n    time.sleep(60)\n"
        ),
    }
    return json.dumps({"files": files})


def test_a_killed_run_s_worktree_is_reclaimed(git_repo: Path, snodo_home: Path) -> None:
    marker = f"slow-{uuid.uuid4().hex}.started"
    write_protocol(git_repo, coder_config=slow_config(marker))
    left = kill_mid_run(git_repo, snodo_home, marker)
    reclaimed = reclaim_abandoned(git_repo, snodo_home)
    assert [r["run_id"] for r in reclaimed] == [left]
    assert reclaimed[0]["halted_ref"] and reclaimed[0]["halted_ref"].startswith("refs/snodo/halted/")
    assert reclaimed[0]["halted_ref"].endswith(f"/{left}")
    assert "src/slow.py" in git(git_repo, "show", "--stat", reclaimed[0]["halted_ref"])
    assert reclaim_abandoned(git_repo, snodo_home) == []


def test_the_next_run_judges_a_killed_run_s_work_before_keeping_it(git_repo: Path, snodo_home: Path, snodo_cli) -> None:  # type: ignore[no-untyped-def]
    marker = f"slow-{uuid.uuid4().hex}.started"
    write_protocol(git_repo, coder_config=slow_config(marker, secret=True))
    left = kill_mid_run(git_repo, snodo_home, marker)
    write_protocol(git_repo)  # the next task is an ordinary one
    r = snodo_cli("run", "add a hello module", "--mock", "--json", cwd=git_repo)
    assert r.returncode == 0, r
    reclaimed = [e["data"] for e in events(git_repo) if e["event"] == "worktree_reclaimed"]
    assert [e["run_id"] for e in reclaimed] == [left] and reclaimed[0]["halted_ref"] is None
    assert "AWS access key id" in reclaimed[0]["discarded"][0]["finding"]
    assert not [ref for ref in refs(git_repo) if ref.startswith("refs/snodo/")]
    for args in (("log", "--all", "-p"), ("log", "--reflog", "-p")):
        assert SECRET not in git(git_repo, *args)
    for copy in (snodo_home / "worktrees" / project_key(git_repo) / "pool").iterdir():
        assert all(SECRET not in f.read_text() for f in copy.rglob("*.py"))


def test_the_next_run_reclaims_a_dead_run_and_leaves_a_live_one(tmp_path: Path, snodo_home: Path, snodo_cli) -> None:  # type: ignore[no-untyped-def]
    from snodo.engine.worktree import create_worktree

    repo = make_repo(tmp_path / "repo")
    write_protocol(repo)
    git(repo, "add", ".snodo")
    git(repo, "commit", "-qm", "protocol")
    live = create_worktree(repo, snodo_home, "task-live", "live0001")  # held by this process
    code = (
        "import sys, os; from pathlib import Path; from snodo.engine.worktree import create_worktree;"
        f"create_worktree(Path({str(repo)!r}), Path({str(snodo_home)!r}), 'task-dead', 'dead0001');"
        "os._exit(0)"  # dies without cleaning up
    )
    subprocess.run([sys.executable, "-c", code], check=True)
    r = snodo_cli("run", "add a hello module", "--mock", "--json", cwd=repo)
    assert r.returncode == 0, r
    reclaimed = [e["data"] for e in events(repo) if e["event"] == "worktree_reclaimed"]
    assert [e["run_id"] for e in reclaimed] == ["dead0001"] and reclaimed[0]["halted_ref"] is None
    assert live.path.is_dir() and git(live.path, "status", "--porcelain") == ""
    live.remove()


def _slow_test_running(marker: str) -> bool:
    """The slow post_execute test has started, in one of the judge's private copies of the
    committed work (under the system's temporary directory)."""
    try:
        return any(Path(tempfile.gettempdir()).glob(f"snodo-judge-*/copy-*/{marker}"))
    except OSError:  # another test's judge removed its directory while the glob walked it
        return False
