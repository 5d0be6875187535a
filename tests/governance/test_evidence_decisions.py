"""Decisions as evidence, end to end with real subprocesses, repositories and homes: bound to
the reviewed git tree, trusted through `.snodo/allowed_signers` on any machine, one pending
decision per question."""

from __future__ import annotations

import json
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import git, judge_prose_only_before, make_repo

FRIENDLY = """Add a greeting module.

Acceptance criteria:
- the greeting sounds friendly
"""

Cli = Callable[..., Any]


def events(repo: Path, name: str) -> list[dict[str, Any]]:
    lines = (repo / ".git" / "snodo" / "audit.log").read_text().splitlines()
    return [e for e in map(json.loads, lines) if e["event"] == name]


@pytest.fixture
def project(project: Path) -> Path:
    """The solo project, its prose criterion judged before the work only: these decisions
    answer an escalation at pre_execute, bound to the task and spec (not to a tree)."""
    judge_prose_only_before(project)
    return project


def escalate(cli: Cli, repo: Path, spec: str = FRIENDLY, **kw: Any) -> dict[str, Any]:
    r = cli("validate", "-", "--json", cwd=repo, input=spec, **kw)
    assert r.returncode == 2, r
    payload: dict[str, Any] = r.json()
    return payload


# ------------------------------------------------------------------ bound to the reviewed tree


def write_protocol(repo: Path) -> None:
    (repo / ".snodo").mkdir(exist_ok=True)
    (repo / ".snodo" / "protocol.yml").write_text("""\
protocol_id: t
name: t
modes:
  - mode_id: producer
    tools: [read, edit, test, validate, dispatch, commit]
    validators: [scope, tests]
    coder: mock
validators:
  - {validator_id: scope, validator_type: protocol}
  - {validator_id: tests, validator_type: pytest, evaluation_phase: post_execute, severity_cap: warn}
execution: {max_recovery_depth: 1}
""")


@pytest.fixture
def broken_suite(tmp_path: Path) -> Path:
    repo = make_repo(tmp_path / "broken")
    (repo / "tests").mkdir()
    # passes at the base; the mock coder's hello module breaks it (a blocker, capped to warn)
    (repo / "tests" / "test_legacy.py").write_text(
        "import pathlib\n\n\ndef test_legacy():\n    assert not pathlib.Path('hello.py').exists()\n"
    )
    git(repo, "add", "tests")
    git(repo, "commit", "-q", "-m", "a test the work will break")
    write_protocol(repo)
    return repo


def test_a_resumed_run_with_different_code_escalates_again(broken_suite: Path, snodo_cli: Cli) -> None:
    halted = snodo_cli("run", "add a hello module", "--json", cwd=broken_suite).json()
    assert halted["outcome"] == "escalate"
    first = halted["decision_id"]
    escalated = events(broken_suite, "escalated")[-1]["data"]
    assert escalated["decision_id"] == first and len(escalated["tree"]) == 40
    assert git(broken_suite, "rev-parse", f"{halted['commit']}^{{tree}}").strip() == escalated["tree"]
    signed = snodo_cli("authorize", first, "--yes", "--json", cwd=broken_suite)
    assert signed.returncode == 0, signed
    record = json.loads(Path(signed.json()["record"]).read_text())
    assert record["tree"] == escalated["tree"]  # the approval names the tree that was reviewed

    # The code changes after the review: the resumed run starts from a different commit.
    (broken_suite / "extra.py").write_text("EXTRA = 1\n")
    git(broken_suite, "add", "extra.py")
    git(broken_suite, "commit", "-q", "-m", "more code")
    resumed = snodo_cli("run", "--resume", halted["task_id"], "--json", cwd=broken_suite)
    assert resumed.returncode == 1, resumed
    again = resumed.json()
    assert again["outcome"] == "escalate" and again["decision_id"] != first
    ignored = [e["data"] for e in events(broken_suite, "decision_ignored")]
    assert any("the work changed since it was reviewed" in i["reason"] for i in ignored), ignored
    assert snodo_cli("audit", "verify", cwd=broken_suite).returncode == 0


# ------------------------------------------------------------------ team trust


def share(repo: Path, *paths: str, cli: Cli, home: Path) -> None:
    """Commit ``paths`` as anyone would, then have the person ``home`` belongs to (listed in
    the allowed_signers being shared) put that .snodo/ in force with a signed commit."""
    git(repo, "add", "-f", *paths)
    git(repo, "commit", "-q", "-m", "share decisions")
    signed = cli("protocol", "sign", "--yes", cwd=repo, env={"SNODO_HOME": str(home)})
    assert signed.returncode == 0, signed


def clone(repo: Path, where: Path) -> Path:
    git(repo.parent, "clone", "-q", str(repo), str(where))
    return where


def keys_line(cli: Cli, cwd: Path, home: Path, name: str) -> str:
    shown = cli("keys", "show", "--name", name, "--json", cwd=cwd, env={"SNODO_HOME": str(home)})
    assert shown.returncode == 0, shown
    line: str = shown.json()["allowed_signers_line"]
    assert line.startswith(f'{name} namespaces="snodo-decision,git" ssh-ed25519 ')
    return line


def test_a_listed_key_adjudicates_on_another_machine(
    project: Path, snodo_cli: Cli, snodo_home: Path, tmp_path: Path
) -> None:
    decision_id = escalate(snodo_cli, project)["decision_id"]
    assert snodo_cli("authorize", decision_id, "--yes", cwd=project).returncode == 0
    (project / ".snodo" / "allowed_signers").write_text(
        "# whose decisions count in this project\n" + keys_line(snodo_cli, project, snodo_home, "ada") + "\n"
    )
    share(project, ".snodo/protocol.yml", ".snodo/decisions", ".snodo/allowed_signers", cli=snodo_cli, home=snodo_home)

    other = clone(project, tmp_path / "ci-checkout")
    ci_home = {"SNODO_HOME": str(tmp_path / "ci-home")}
    ok = snodo_cli("validate", "-", "--json", cwd=other, input=FRIENDLY, env=ci_home)
    assert ok.returncode == 0, ok
    assert ok.json()["policy"]["adjudicated"] == ["criteria"]

    # The list in force is the committed one: a checkout that deletes its copy changes nothing.
    bare = clone(project, tmp_path / "bare-checkout")
    (bare / ".snodo" / "allowed_signers").unlink()
    still = snodo_cli("validate", "-", "--json", cwd=bare, input=FRIENDLY, env=ci_home)
    assert still.returncode == 0, still
    assert still.json()["policy"]["adjudicated"] == ["criteria"]


def test_an_unlisted_keys_decision_is_ignored_and_audited_with_its_signer(
    project: Path, snodo_cli: Cli, snodo_home: Path, tmp_path: Path
) -> None:
    decision_id = escalate(snodo_cli, project)["decision_id"]
    signed = snodo_cli("authorize", decision_id, "--yes", "--json", cwd=project)
    record = json.loads(Path(signed.json()["record"]).read_text())
    bob_home = tmp_path / "bob-home"
    (project / ".snodo" / "allowed_signers").write_text(keys_line(snodo_cli, project, bob_home, "bob") + "\n")
    share(project, ".snodo/protocol.yml", ".snodo/decisions", ".snodo/allowed_signers", cli=snodo_cli, home=bob_home)

    bobs = clone(project, tmp_path / "bob-checkout")
    r = snodo_cli("validate", "-", "--json", cwd=bobs, input=FRIENDLY, env={"SNODO_HOME": str(bob_home)})
    assert r.returncode == 2, r  # ada's approval does not count here
    ignored = events(bobs, "decision_ignored")[-1]["data"]
    assert ignored["signer"] == record["decided_by"]
    assert ignored["key"] == record["public_key_fingerprint"]
    assert "not listed in" in ignored["reason"] and "allowed_signers" in ignored["reason"]
    # ...not even on ada's own machine, once the project lists only bob.
    again = snodo_cli("validate", "-", "--json", cwd=project, input=FRIENDLY)
    assert again.returncode == 2, again


def test_an_uncommitted_allowed_signers_lists_nobody(
    project: Path, snodo_cli: Cli, snodo_home: Path, tmp_path: Path
) -> None:
    """The list in force is the committed one the trust rule puts in force: an agent that
    writes its own key into the working tree's allowed_signers and signs a decision with it
    gets nothing (no list is in force here, so only this home's key counts)."""
    from snodo.cli.signing import sign_decision
    from snodo.state.decisions import DecisionStore, draft_decision
    from snodo.state.sessions import SessionStore

    git(project, "add", ".snodo/protocol.yml")
    git(project, "commit", "-q", "-m", "the protocol, no allowed_signers")
    decision_id = escalate(snodo_cli, project)["decision_id"]
    _, pending = SessionStore(snodo_home).find_pending(decision_id, project)
    mallory = tmp_path / "mallory-home"
    forged = sign_decision(
        mallory, draft_decision(pending, decision="approve", justification="fine", decided_by="mallory"), pending
    )
    DecisionStore(project, snodo_home, signers=None).save(forged)
    (project / ".snodo" / "allowed_signers").write_text(keys_line(snodo_cli, project, mallory, "mallory") + "\n")
    r = snodo_cli("validate", "-", "--json", cwd=project, input=FRIENDLY)
    assert r.returncode == 2, r  # still escalated: mallory's approval does not count
    ignored = events(project, "decision_ignored")[-1]["data"]
    assert ignored["key"] == forged.public_key_fingerprint and ignored["signer"] == "mallory", ignored
    assert "listed in" not in ignored["reason"], ignored  # no list is in force: the file on disk is none
    # nor does `snodo authorize --prune` take it as settling the question
    pruned = snodo_cli("authorize", "--prune", "--json", cwd=project)
    assert pruned.returncode == 0 and pruned.json()["pruned"] == [], pruned


def test_an_uncommitted_malformed_allowed_signers_is_not_in_force(project: Path, snodo_cli: Cli) -> None:
    """Only a committed list the trust rule puts in force decides (and git parses that one
    when it checks the signature that puts it in force): a broken file in the working tree
    neither counts as a list nor stops the home's own decision from counting."""
    decision_id = escalate(snodo_cli, project)["decision_id"]
    assert snodo_cli("authorize", decision_id, "--yes", cwd=project).returncode == 0
    (project / ".snodo" / "allowed_signers").write_text("ada not-a-key\n")
    r = snodo_cli("validate", "-", "--json", cwd=project, input=FRIENDLY)
    assert r.returncode == 0, r


# ------------------------------------------------------------------ one pending decision per question


def test_one_pending_decision_per_question_and_prune(
    project: Path, snodo_cli: Cli, snodo_home: Path, tmp_path: Path
) -> None:
    first = escalate(snodo_cli, project)
    again = escalate(snodo_cli, project)
    assert again["decision_id"] == first["decision_id"]
    assert [e["data"].get("repeated") for e in events(project, "escalated")] == [None, True]
    task = first["task_id"]
    r = snodo_cli("validate", "-", "--json", "--task-id", task, cwd=project, input=FRIENDLY + "- and short\n")
    assert r.returncode == 2
    newer = r.json()["decision_id"]
    assert newer != first["decision_id"]
    listing = snodo_cli("authorize", "--json", cwd=project).json()["pending"]
    assert sorted(p["decision_id"] for p in listing) == sorted([first["decision_id"], newer])

    pruned = snodo_cli("authorize", "--prune", "--json", cwd=project)
    assert pruned.returncode == 0, pruned
    dropped = pruned.json()["pruned"]
    assert [d["decision_id"] for d in dropped] == [first["decision_id"]]
    assert "superseded" in dropped[0]["reason"]
    assert [p["decision_id"] for p in snodo_cli("authorize", "--json", cwd=project).json()["pending"]] == [newer]
    assert events(project, "decision_pruned")[-1]["data"]["decision_id"] == first["decision_id"]


def test_prune_drops_a_pending_decision_a_teammate_already_settled(
    project: Path, snodo_cli: Cli, snodo_home: Path, tmp_path: Path
) -> None:
    decision_id = escalate(snodo_cli, project)["decision_id"]
    assert snodo_cli("authorize", decision_id, "--yes", cwd=project).returncode == 0
    (project / ".snodo" / "allowed_signers").write_text(keys_line(snodo_cli, project, snodo_home, "ada") + "\n")
    # the records are not pulled yet (kept out of the signed .snodo/ too)
    (project / ".snodo" / "decisions").rename(tmp_path / "ada-decisions")
    share(project, ".snodo/protocol.yml", ".snodo/allowed_signers", cli=snodo_cli, home=snodo_home)
    (tmp_path / "ada-decisions").rename(project / ".snodo" / "decisions")

    bobs = clone(project, tmp_path / "bob-checkout")
    bob = {"SNODO_HOME": str(tmp_path / "bob-home")}
    pending = escalate(snodo_cli, bobs, env=bob)["decision_id"]
    shutil.copytree(project / ".snodo" / "decisions", bobs / ".snodo" / "decisions")  # ada's record arrives
    pruned = snodo_cli("authorize", "--prune", "--json", cwd=bobs, env=bob).json()["pruned"]
    assert [(p["decision_id"], p["reason"]) for p in pruned] == [
        (pending, "already settled by a verified decision record")
    ]
