"""`snodo run` end to end on real repositories: the governed loop, recovery, filtering, resume, jobs."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest

from tests.conftest import git, make_repo, write_producer_protocol


def events(repo: Path) -> list[dict]:  # type: ignore[type-arg]
    lines = (repo / ".git" / "snodo" / "audit.log").read_text().splitlines()
    return [e for e in map(json.loads, lines) if e["event"] != "checkpoint"]


def names(repo: Path) -> list[str]:
    return [e["event"] for e in events(repo)]


@pytest.fixture
def fresh(tmp_path: Path) -> Path:
    """A fresh repository with no commit at all, as `git init` leaves it."""
    repo = tmp_path / "fresh"
    repo.mkdir()
    git(repo, "init", "-q", "-b", "main")
    return repo


def test_mock_run_in_fresh_repo_commits_on_a_task_branch(fresh: Path, snodo_cli) -> None:  # type: ignore[no-untyped-def]
    assert snodo_cli("init", "--template", "solo", cwd=fresh).returncode == 0
    r = snodo_cli("run", "add a hello module", "--mock", "--json", cwd=fresh)
    assert r.returncode == 0, r
    payload = r.json()
    assert payload["status"] == "completed" and payload["outcome"] is None
    branch = payload["branch"]
    assert branch.startswith(f"snodo/{payload['task_id']}-")
    assert sorted(payload["files"]) == ["hello.py", "tests/test_hello.py"]
    tree = git(fresh, "ls-tree", "-r", "--name-only", branch).split()
    assert {"hello.py", "tests/test_hello.py"} <= set(tree)
    # The user's checkout is untouched: still on an unborn main, no files written there.
    assert not (fresh / "hello.py").exists()
    assert git(fresh, "symbolic-ref", "--short", "HEAD").strip() == "main"
    seen = names(fresh)
    required = ["session_started", "validate", "token_issued", "token_consumed", "dispatch", "validate", "completed"]
    it = iter(seen)
    assert all(any(e == want for e in it) for want in required), seen
    phases = [e["data"]["phase"] for e in events(fresh) if e["event"] == "validate"]
    assert phases == ["pre_execute", "post_execute"]
    assert snodo_cli("audit", "verify", cwd=fresh).returncode == 0
    again = snodo_cli("run", "add a hello module", "--mock", "--json", cwd=fresh)
    assert again.returncode == 0 and again.json()["branch"] != branch  # a rerun never collides


def write_protocol(repo: Path, *, cap: str = "", coder_config: str = "{}", depth: int = 3) -> None:
    write_producer_protocol(
        repo, coder_config=coder_config, tests_extra=cap, tail=f"execution: {{max_recovery_depth: {depth}}}\n"
    )


@pytest.fixture
def broken_suite(tmp_path: Path) -> Path:
    repo = make_repo(tmp_path / "broken")
    (repo / "tests").mkdir()
    # passes at the base; the mock coder's hello module breaks it
    (repo / "tests" / "test_legacy.py").write_text(
        "import pathlib\n\n\ndef test_legacy():\n    assert not pathlib.Path('hello.py').exists(), 'legacy'\n"
    )
    git(repo, "add", "tests")
    git(repo, "commit", "-q", "-m", "a test the work will break")
    return repo


def test_uncapped_post_failure_halts_blocker_with_output_tail(broken_suite: Path, snodo_cli) -> None:  # type: ignore[no-untyped-def]
    write_protocol(broken_suite)
    r = snodo_cli("run", "add a hello module", "--json", cwd=broken_suite)
    assert r.returncode == 1, r
    payload = r.json()
    assert (payload["status"], payload["outcome"], payload["phase"]) == ("halted", "blocker", "post_execute")
    assert "tests/test_legacy.py::test_legacy (failed)" in json.dumps(payload["validators"])
    assert "AssertionError: legacy" in json.dumps(payload["validators"])
    assert "recovery" not in names(broken_suite)
    assert "no human decision can override" in payload["next"]


def test_capped_failure_recovers_exactly_max_recovery_depth_times(broken_suite: Path, snodo_cli) -> None:  # type: ignore[no-untyped-def]
    write_protocol(broken_suite, cap=", severity_cap: warn", depth=2)
    r = snodo_cli("run", "add a hello module", "--json", cwd=broken_suite)
    assert r.returncode == 1, r
    payload = r.json()
    assert payload["outcome"] == "escalate" and payload["attempts"] == 2
    assert payload["decision_id"]
    assert names(broken_suite).count("recovery") == 2
    assert [e["data"]["attempt"] for e in events(broken_suite) if e["event"] == "dispatch"] == [0, 1, 2]
    tests_result = next(v for v in payload["validators"] if v["validator_id"] == "tests")
    assert (tests_result["severity"], tests_result["severity_original"]) == ("warn", "blocker")


def test_resume_after_authorize_completes(broken_suite: Path, snodo_cli) -> None:  # type: ignore[no-untyped-def]
    write_protocol(broken_suite, cap=", severity_cap: warn", depth=1)
    halted = snodo_cli("run", "add a hello module", "--json", cwd=broken_suite).json()
    assert halted["outcome"] == "escalate"
    assert snodo_cli("authorize", halted["decision_id"], "--yes", cwd=broken_suite).returncode == 0
    resumed = snodo_cli("run", "--resume", halted["task_id"], "--json", cwd=broken_suite)
    assert resumed.returncode == 0, resumed
    assert resumed.json()["status"] == "completed"
    validates = [e["data"] for e in events(broken_suite) if e["event"] == "validate"]
    assert [v["phase"] for v in validates].count("pre_execute") == 2  # a resumed run validates again
    # It completes on exactly the git tree the person reviewed (the decision binds to it).
    decided = next(e["data"] for e in events(broken_suite) if e["event"] == "decision_recorded")
    assert (validates[-1]["phase"], validates[-1]["status"]) == ("post_execute", "pass")
    assert validates[-1]["tree"] == decided["tree"]


def test_mock_writing_governance_state_is_filtered_and_audited(git_repo: Path, snodo_cli) -> None:  # type: ignore[no-untyped-def]
    protocol_before = None
    write_protocol(
        git_repo,
        coder_config=(
            '{files: {".snodo/protocol.yml": "hacked", "src/ok.py": "OK = 1\\n", '
            '"tests/test_ok.py": "from src.ok import OK\\n\\ndef test_ok():\\n    assert OK == 1\\n"}}'
        ),
    )
    protocol_before = (git_repo / ".snodo" / "protocol.yml").read_text()
    r = snodo_cli("run", "add the ok module", "--json", cwd=git_repo)
    # the rest of the work passed, but a refused write is never dropped quietly: a person decides
    assert r.returncode == 1, r
    payload = r.json()
    assert (payload["status"], payload["outcome"]) == ("halted", "escalate"), payload
    refused = next(v for v in payload["validators"] if v["validator_id"] == "refused-writes")
    assert refused["details"]["refused"][0]["path"] == ".snodo/protocol.yml"
    assert (git_repo / ".snodo" / "protocol.yml").read_text() == protocol_before
    tree = git(git_repo, "ls-tree", "-r", "--name-only", payload["commit"]).split()
    assert ".snodo/protocol.yml" not in tree and "src/ok.py" in tree
    refused = [e for e in events(git_repo) if e["event"] == "path_refused"]
    assert refused and refused[0]["data"]["path"] == ".snodo/protocol.yml"
    assert ".snodo/" in refused[0]["data"]["reason"]


def test_background_job_and_jobs_commands(git_repo: Path, snodo_cli) -> None:  # type: ignore[no-untyped-def]
    assert snodo_cli("init", cwd=git_repo).returncode == 0
    started = snodo_cli("run", "add a hello module", "--mock", "--background", "--json", cwd=git_repo)
    assert started.returncode == 0, started
    job_id = started.json()["job_id"]
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        job = snodo_cli("jobs", "show", job_id, "--json", cwd=git_repo).json()
        if job["status"] in ("completed", "halted"):
            break
        time.sleep(0.3)
    assert job["status"] == "completed", job
    assert job["result"]["files"]
    listed = snodo_cli("jobs", "list", "--json", cwd=git_repo).json()["jobs"]
    assert [j["job_id"] for j in listed] == [job_id]
    assert (git_repo / ".git" / "snodo" / "jobs" / job_id / "spec.md").read_text() == "add a hello module"


def test_bad_protocol_and_missing_repo_exit_nonzero(tmp_path: Path, snodo_cli) -> None:  # type: ignore[no-untyped-def]
    (tmp_path / ".snodo").mkdir()
    (tmp_path / ".snodo" / "protocol.yml").write_text("protocol_id: [\n")
    r = snodo_cli("run", "x", "--mock", cwd=tmp_path)
    assert r.returncode != 0 and "YAML syntax error" in r.stderr
    (tmp_path / ".snodo" / "protocol.yml").unlink()
    assert snodo_cli("init", cwd=tmp_path).returncode == 0
    r = snodo_cli("run", "add a hello module", "--mock", "--json", cwd=tmp_path)
    assert r.returncode == 4 and r.json()["exit_code"] == 4  # could not run: no job, nothing halted
    assert "not a git repository" in r.json()["error"] and "git init" in r.json()["hint"]


def test_uncommitted_changes_are_named_and_left_alone(git_repo: Path, snodo_cli) -> None:  # type: ignore[no-untyped-def]
    assert snodo_cli("init", cwd=git_repo).returncode == 0
    (git_repo / "README.md").write_text("# my local edit\n")
    r = snodo_cli("run", "add a hello module", "--mock", cwd=git_repo)
    assert r.returncode == 0, r
    assert "uncommitted path(s) were not part of it (README.md)" in r.stderr
    assert (git_repo / "README.md").read_text() == "# my local edit\n"
