"""A run that escalates after execution, is approved by a listed person and resumed, ends
with every commit of its branch attested: the statement names the decision and its signer,
and `snodo verify` passes the range against the trust root committed on `main`."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.conftest import BROKEN_BY_HELLO, git, make_repo, write_producer_protocol

pytestmark = pytest.mark.slow


def test_an_approved_escalation_resumed_to_completion_is_attested(tmp_path: Path, snodo_cli) -> None:  # type: ignore[no-untyped-def]
    repo = make_repo(tmp_path / "repo")
    (repo / "tests").mkdir()
    (repo / "tests" / "test_legacy.py").write_text(BROKEN_BY_HELLO)
    write_producer_protocol(repo, tests_extra=", severity_cap: warn", tail="execution: {max_recovery_depth: 1}\n")
    lines = snodo_cli("keys", "show", "--name", "ada", cwd=repo)
    (repo / ".snodo" / "allowed_signers").write_text(lines.stdout)
    git(repo, "add", "tests")
    git(repo, "commit", "-q", "-m", "a failing test")
    signed = snodo_cli("protocol", "sign", "--yes", "-m", "the protocol and who is trusted", cwd=repo)
    assert signed.returncode == 0, signed

    halted = snodo_cli("run", "add a hello module", "--json", cwd=repo).json()
    assert halted["outcome"] == "escalate", halted
    assert snodo_cli("authorize", halted["decision_id"], "--yes", cwd=repo).returncode == 0
    resumed = snodo_cli("run", "--resume", halted["task_id"], "--json", cwd=repo)
    assert resumed.returncode == 0, resumed
    branch = resumed.json()["branch"]

    commits = git(repo, "rev-list", f"main..{branch}").split()
    assert len(commits) == 2  # the first attempt and the fix: both carry the run's statement
    for commit in commits:
        shown = snodo_cli("attest", "show", commit, "--json", cwd=repo)
        assert shown.returncode == 0, shown
        predicate = shown.json()["statement"]["predicate"]
        assert predicate["judged"] is True and predicate["task_id"] == halted["task_id"]
        (decision,) = predicate["decisions"]
        assert decision["decision_id"] == halted["decision_id"] and decision["decision"] == "approve"
        assert decision["key"].startswith("sha256:") and decision["decided_by"]
        tests = next(v for v in predicate["validators"] if v["validator_id"] == "tests")
        assert (tests["severity"], tests["severity_original"]) == ("warn", "blocker")

    verified = snodo_cli("verify", f"main..{branch}", "--json", cwd=repo)
    assert verified.returncode == 0, verified
    assert [r["how"] for r in json.loads(verified.stdout)["commits"]] == ["attestation", "attestation"]
    # The halted first run left its commits under refs/snodo/halted: never attested.
    halted_ref = halted["halted_ref"]
    assert halted_ref and snodo_cli("verify", f"main..{halted_ref}", cwd=repo).returncode == 1
