"""At 60 and 80 columns, in a real terminal, nothing a person must read or copy is cut:
decision ids, job and task ids, branches, paths and the next steps.

Each command runs with stdout on a pty sized with TIOCSWINSZ (no COLUMNS), and the screen
is read back through a terminal emulator.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from tests.cli.conftest import Screen
from tests.conftest import CliResult, make_repo

FRIENDLY = "Add a greeting module.\n\nAcceptance criteria:\n- the greeting sounds friendly\n"
WIDTHS = (60, 80)


def pending(repo: Path) -> set[str]:
    out = subprocess.run(
        [sys.executable, "-m", "snodo", "authorize", "--json"], cwd=repo, capture_output=True, text=True, check=True
    ).stdout
    return {p["decision_id"] for p in json.loads(out)["pending"]}


def no_ellipsised_id(screen: Screen) -> None:
    assert not re.search(r"(dec|job|task|sess\w*)-[0-9a-f]*…", screen.text), screen


@pytest.fixture(scope="module")
def deep_project(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A project whose path is longer than the narrowest terminal, so paths must wrap."""
    base = tmp_path_factory.mktemp("width")
    return base / "a-rather-long-directory-name-for-a-project" / "with-a-second-long-level" / "repo"


@pytest.fixture
def escalated(
    deep_project: Path, snodo_cli: Callable[..., CliResult], snodo_home: Path
) -> tuple[Path, dict[str, Any], dict[str, Any]]:
    """A project with a halted run (escalated at post_execute: a prose criterion with no model
    asks a person after the work) and its pending decision."""
    repo = make_repo(deep_project.parent / f"repo-{snodo_home.name}")
    assert snodo_cli("init", "--template", "solo", cwd=repo).returncode == 0
    run = snodo_cli("run", "-", "--mock", "--json", cwd=repo, input=FRIENDLY)
    assert run.returncode == 1, run
    payload = run.json()
    assert (payload["outcome"], payload["phase"]) == ("escalate", "post_execute") and payload["decision_id"], payload
    sessions = snodo_cli("session", "list", "--json", cwd=repo).json()["sessions"]
    return repo, payload, sessions[0]


@pytest.mark.slow
@pytest.mark.parametrize("cols", WIDTHS)
def test_validate_and_authorize_show_the_decision_id_whole(
    cols: int, escalated: tuple[Path, dict[str, Any], dict[str, Any]], in_pty: Callable[..., Screen]
) -> None:
    repo, halted, _session = escalated
    decision = halted["decision_id"]
    before = pending(repo)
    v = in_pty("validate", "-", "--phase", "post_execute", cwd=repo, cols=cols, stdin=FRIENDLY)
    assert v.returncode == 2, v
    # re-validating an unchanged escalation answers with the decision already pending
    (validated,) = (pending(repo) - before) or {decision}
    assert v.on_one_line(validated) and v.on_one_line(halted["task_id"]), v
    assert f"snodo authorize {validated}" in v.words(), v
    assert "dispatch_task" not in v.text  # the agent's instruction stays in the JSON
    no_ellipsised_id(v)

    a = in_pty("authorize", cwd=repo, cols=cols)
    assert a.returncode == 0, a
    assert a.on_one_line(decision) and a.on_one_line(validated) and a.on_one_line(halted["task_id"]), a
    assert str(repo) in a.joined(), a
    assert "snodo authorize DECISION_ID" in a.words()
    no_ellipsised_id(a)

    one = in_pty("authorize", decision, "--reject", "--yes", cwd=repo, cols=cols)
    assert one.returncode == 0, one
    assert one.on_one_line(decision), one
    assert "the greeting sounds friendly" in one.words()  # the stored spec, shown whole
    assert f"snodo run --resume {halted['task_id']}" in one.words(), one
    no_ellipsised_id(one)


@pytest.mark.slow
@pytest.mark.parametrize("cols", WIDTHS)
def test_run_jobs_sessions_and_audit_keep_every_value(
    cols: int, escalated: tuple[Path, dict[str, Any], dict[str, Any]], in_pty: Callable[..., Screen]
) -> None:
    repo, halted, session = escalated

    before = pending(repo)
    run = in_pty("run", "-", "--mock", cwd=repo, cols=cols, stdin=FRIENDLY)
    assert run.returncode == 1, run
    (decision,) = (pending(repo) - before) or {halted["decision_id"]}  # one pending decision per question
    for value in (halted["task_id"], decision):
        assert run.on_one_line(value), run
    job_ids = re.findall(r"job-\d{14}-[0-9a-f]{6}", run.text)
    assert job_ids, run
    assert " ".join(halted["next"].replace(halted["decision_id"], decision).split()) in run.words(), run
    no_ellipsised_id(run)

    listed = in_pty("jobs", "list", cwd=repo, cols=cols)
    assert listed.returncode == 0, listed
    assert listed.on_one_line(halted["job_id"]) and listed.on_one_line(job_ids[0]), listed
    assert listed.on_one_line(halted["task_id"]), listed
    no_ellipsised_id(listed)

    shown = in_pty("jobs", "show", halted["job_id"], cwd=repo, cols=cols)
    assert shown.returncode == 0, shown
    assert shown.on_one_line(halted["job_id"]) and shown.on_one_line(halted["decision_id"]), shown
    log_path = str(repo / ".git" / "snodo" / "jobs" / halted["job_id"] / "log.txt")
    assert log_path in shown.joined(), shown
    assert "{" not in shown.text.splitlines()[0]  # rendered for a person, not JSON

    log = in_pty("jobs", "show", halted["job_id"], "--log", cwd=repo, cols=cols)
    first = (repo / ".git" / "snodo" / "jobs" / halted["job_id"] / "log.txt").read_text().splitlines()[0]
    assert log.returncode == 0 and first[: cols - 1] in log.text and "\\n" not in log.text, log

    sess = in_pty("session", "show", session["session_id"], cwd=repo, cols=cols)
    assert sess.returncode == 0, sess
    assert sess.on_one_line(session["session_id"]) and sess.on_one_line(halted["decision_id"]), sess
    assert str(repo) in sess.joined()
    no_ellipsised_id(sess)

    sessions = in_pty("session", "list", cwd=repo, cols=cols)
    assert sessions.on_one_line(session["session_id"]), sessions

    audit = in_pty("audit", "show", "--event", "escalated", cwd=repo, cols=cols)
    assert audit.returncode == 0, audit
    assert halted["decision_id"] in audit.joined(), audit
    record = json.loads((repo / ".git" / "snodo" / "audit.log").read_text().splitlines()[-1])
    assert record  # the log is there; show printed every escalation whole (above)


@pytest.mark.slow
@pytest.mark.parametrize("cols", WIDTHS)
def test_a_completed_run_shows_its_branch_and_files(
    cols: int, tmp_path: Path, snodo_cli: Callable[..., CliResult], in_pty: Callable[..., Screen]
) -> None:
    repo = make_repo(tmp_path / "a-directory-name-long-enough-to-wrap" / "repo")
    assert snodo_cli("init", "--template", "solo", cwd=repo).returncode == 0
    # the tests take long enough for the spinner to count a second, however fast the machine
    (repo / "conftest.py").write_text("import time\n\n\ndef pytest_sessionstart(session):\n    time.sleep(1.5)\n")
    subprocess.run(["git", "add", "conftest.py"], cwd=repo, check=True)
    subprocess.run(["git", "commit", "-qm", "slow tests"], cwd=repo, check=True)
    run = in_pty("run", "add a hello module", "--mock", cwd=repo, cols=cols, stderr_on_tty=True)
    assert run.returncode == 0, run
    branch = re.search(r"snodo/task-[0-9a-f]+-[0-9a-f]+", run.text)
    assert branch, run
    assert "hello.py" in run.text and "tests/test_hello.py" in run.joined()
    # progress went to the same terminal, with elapsed time, and its spinner left no debris
    assert re.search(r"\d+\.\ds · pre_execute: running", run.text), run
    assert "⠋" not in run.text and "working" not in run.text.splitlines()[-1]
    # while the tests ran, a spinner said which validators were running and for how long
    assert re.search(r"running tests(, acceptance)?  [1-9]\d*s", run.raw), run.raw[-3000:]


@pytest.mark.parametrize("cols", WIDTHS)
def test_plugins_list_every_registration_whole(cols: int, tmp_path: Path, in_pty: Callable[..., Screen]) -> None:
    p = in_pty("plugins", cwd=tmp_path, cols=cols)
    assert p.returncode == 0, p
    assert "…" not in p.text, p
    for value in ("validator acceptance", "coder opencode", "predicate no_secrets_in_diff", "snodo_validators"):
        assert p.on_one_line(value), p
