"""The one allowed_signers parser: git's format with ``namespaces=``, what each namespace lets
a key sign, and `snodo verify`'s refusals to run (exit 4) when there is no trust root."""

from __future__ import annotations

from pathlib import Path

import pytest
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from snodo.base.errors import StateError
from snodo.evidence.verify import VerifyProblem, verify
from snodo.state.keys import openssh_public
from snodo.state.signers import ATTESTATION_NAMESPACE, DECISION_NAMESPACE, parse_allowed_signers, signers_for
from tests.conftest import git, make_repo


def key() -> str:
    return openssh_public(Ed25519PrivateKey.generate().public_key())


def test_namespaces_decide_what_a_key_may_sign() -> None:
    plain, decider, machine, both = key(), key(), key(), key()
    text = (
        f"# the team\nann {plain} ann@laptop\n\n"
        f'bob namespaces="{DECISION_NAMESPACE}" {decider}\n'
        f'ci namespaces="{ATTESTATION_NAMESPACE}" {machine}\n'
        f'cy valid-after="20240101",namespaces="git,{DECISION_NAMESPACE},{ATTESTATION_NAMESPACE}" {both}\n'
        'rsa-person namespaces="git" ssh-rsa AAAAB3NzaC1yc2EAAAADAQABAAABAQ\n'
    )
    signers = parse_allowed_signers(text, "allowed_signers")
    assert [s.name for s in signers] == ["ann", "bob", "ci", "cy", "rsa-person"]
    assert signers[4].key is None and signers[4].line.startswith("rsa-person")  # kept for git's own check
    deciders = {s.name for s in signers_for(signers, DECISION_NAMESPACE).values()}
    attesters = {s.name for s in signers_for(signers, ATTESTATION_NAMESPACE).values()}
    assert deciders == {"ann", "bob", "cy"}
    # A line without namespaces is a person's key: it never becomes an attestation key by omission.
    assert attesters == {"ci", "cy"}


@pytest.mark.parametrize("line", ["ada not-a-key", "ada", 'ada namespaces="x"', "ada ssh-ed25519 !!!"])
def test_a_line_that_does_not_parse_fails_the_whole_file(line: str) -> None:
    with pytest.raises(StateError, match="allowed_signers:2"):
        parse_allowed_signers(f"ok {key()}\n{line}\n", "allowed_signers")


def test_verify_cannot_run_without_a_trust_root_at_the_base(git_repo: Path) -> None:
    git(git_repo, "checkout", "-q", "-b", "work")
    (git_repo / "a.txt").write_text("a\n")
    git(git_repo, "add", "a.txt")
    git(git_repo, "commit", "-q", "-m", "a")
    with pytest.raises(VerifyProblem, match=r"has no \.snodo/allowed_signers"):
        verify(git_repo, "main..work")
    with pytest.raises(VerifyProblem, match="names no commit"):
        verify(git_repo, "nope..work")
    with pytest.raises(VerifyProblem, match="no upstream"):
        verify(git_repo)


def test_the_branch_cannot_supply_its_own_trust_root(tmp_path: Path, snodo_cli) -> None:  # type: ignore[no-untyped-def]
    repo = make_repo(tmp_path / "repo")
    git(repo, "checkout", "-q", "-b", "work")
    (repo / ".snodo").mkdir()
    (repo / ".snodo" / "allowed_signers").write_text(f"me {key()}\n")
    git(repo, "add", ".snodo")
    git(repo, "commit", "-q", "-m", "trust myself")
    mine = git(repo, "rev-parse", "HEAD").strip()
    # where the base has no list, a first one counts only signed by a principal it lists
    result = snodo_cli("verify", "main..work", "--json", cwd=repo)
    assert result.returncode == 1, result
    (refused,) = result.json()["commits"]
    assert refused["sha"] == mine and f"commit {mine[:12]} brings the first .snodo/allowed_signers" in refused["reason"]
    assert "snodo protocol sign" in refused["action"]
