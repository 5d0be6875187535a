"""Trust bootstrapped as the docs say, by a person at the command line: `snodo init`,
`snodo keys show > .snodo/allowed_signers`, `snodo protocol sign -m …`, then a governed run
completes and `snodo verify` passes. An unsigned protocol change afterwards is refused by
`run` and by `verify`, both naming the commit and `snodo protocol sign`, which then adopts
it. A replaced home is said to be one.

Everything is real: a git repository in a temporary directory, the `snodo` command as a
subprocess, keys in a temporary `$SNODO_HOME`, git's own signature check."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.conftest import CliResult, git

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(shutil.which("ssh-keygen") is None, reason="git checks SSH signatures with ssh-keygen"),
]

Cli = Callable[..., CliResult]


def bootstrap(repo: Path, snodo_cli: Cli) -> str:
    """The two commands of the docs (after `snodo init`); returns the signed commit."""
    assert snodo_cli("init", cwd=repo).returncode == 0
    shown = snodo_cli("keys", "show", cwd=repo)
    assert shown.returncode == 0, shown
    (repo / ".snodo" / "allowed_signers").write_text(shown.stdout)
    signed = snodo_cli("protocol", "sign", "-m", "trust my key", "--yes", cwd=repo)
    assert signed.returncode == 0, signed
    return signed.stdout.strip()


def verify_json(snodo_cli: Cli, repo: Path, revisions: str) -> tuple[int, dict[str, dict[str, str]]]:
    r = snodo_cli("verify", revisions, "--json", cwd=repo)
    assert r.returncode in (0, 1), r
    return r.returncode, {c["sha"]: c for c in r.json()["commits"]}


def test_the_bootstrap_as_a_user_does_it(git_repo: Path, snodo_cli: Cli) -> None:
    initial = git(git_repo, "rev-parse", "HEAD").strip()
    (git_repo / "notes.txt").write_text("mine, staged, not the protocol's\n")
    git(git_repo, "add", "notes.txt")
    shown = snodo_cli("keys", "show", cwd=git_repo)
    decision_line, audit_line = shown.stdout.splitlines()
    assert ' namespaces="snodo-decision,git" ssh-ed25519 ' in decision_line  # git checks signed commits in `git`
    assert ' namespaces="snodo-attestation" ssh-ed25519 ' in audit_line

    signed = bootstrap(git_repo, snodo_cli)
    assert git(git_repo, "rev-parse", "HEAD").strip() == signed
    # only .snodo/ went into the signed commit; what the user staged is still staged
    assert git(git_repo, "show", "--name-only", "--format=", signed).split() == [
        ".snodo/allowed_signers",
        ".snodo/protocol.yml",
    ]
    assert git(git_repo, "diff", "--cached", "--name-only").split() == ["notes.txt"]
    # plain git accepts the signature, with nothing configured but the list to check against
    checked = subprocess.run(
        [
            "git",
            "-C",
            str(git_repo),
            "-c",
            "gpg.ssh.allowedSignersFile=.snodo/allowed_signers",
            "verify-commit",
            signed,
        ],
        capture_output=True,
        text=True,
    )
    assert checked.returncode == 0 and 'Good "git" signature' in checked.stderr, checked.stderr

    run = snodo_cli("run", "add a hello module", "--mock", "--json", cwd=git_repo)
    assert run.returncode == 0, run
    branch = run.json()["branch"]
    code, commits = verify_json(snodo_cli, git_repo, f"{initial}..{branch}")
    assert code == 0, commits
    assert commits[signed]["how"] == "signature"  # the first list, signed by a principal it lists
    assert [c["how"] for c in commits.values()] == ["attestation", "signature"]
    assert snodo_cli("verify", f"main..{branch}", cwd=git_repo).returncode == 0


def test_an_unsigned_change_is_refused_by_run_and_verify_and_adopted_by_signing(git_repo: Path, snodo_cli: Cli) -> None:
    initial = git(git_repo, "rev-parse", "HEAD").strip()
    bootstrap(git_repo, snodo_cli)
    protocol = git_repo / ".snodo" / "protocol.yml"
    protocol.write_text(protocol.read_text() + "# loosened without anyone signing\n")
    git(git_repo, "commit", "-qam", "an unsigned protocol change")
    unsigned = git(git_repo, "rev-parse", "HEAD").strip()

    run = snodo_cli("run", "add a hello module", "--mock", cwd=git_repo)
    assert run.returncode == 4, run  # could not run: the rules at HEAD are not in force
    assert f"commit {unsigned[:12]} changes .snodo/ without a good signature" in run.stderr
    assert "snodo protocol sign" in run.stderr
    code, commits = verify_json(snodo_cli, git_repo, f"{initial}..HEAD")
    assert code == 1
    assert f"commit {unsigned[:12]} changes .snodo/ without a good signature" in commits[unsigned]["reason"]
    assert "snodo protocol sign" in commits[unsigned]["action"]
    text = snodo_cli("verify", f"{initial}..HEAD", cwd=git_repo)
    assert text.returncode == 1 and text.stdout.startswith(unsigned[:12]), text

    # A person's command: with no terminal to ask on and no --yes, it refuses and says how.
    asked = snodo_cli("protocol", "sign", cwd=git_repo, input="y\n")  # stdin is a pipe, not a terminal
    assert asked.returncode == 4 and "--yes" in asked.stderr, asked
    assert git(git_repo, "rev-parse", "HEAD").strip() == unsigned
    confined = snodo_cli("protocol", "sign", "--yes", cwd=git_repo, env={"SNODO_SANDBOX_RUN": "1"})
    assert confined.returncode == 4 and "a person's act" in confined.stderr, confined  # never from confined code
    adopted = snodo_cli("protocol", "sign", "--yes", "--json", cwd=git_repo)
    assert adopted.returncode == 0, adopted
    adoption = adopted.json()["commit"]
    assert adopted.json()["adopted"] is True
    # the adoption changes no file: HEAD's .snodo/ is now in force as it was committed
    assert git(git_repo, "rev-parse", f"{adoption}^{{tree}}") == git(git_repo, "rev-parse", f"{unsigned}^{{tree}}")
    again = snodo_cli("run", "add a hello module", "--mock", "--json", cwd=git_repo)
    assert again.returncode == 0, again
    code, commits = verify_json(snodo_cli, git_repo, f"{initial}..HEAD")
    assert code == 0, commits
    assert commits[adoption]["how"] == "signature" and commits[unsigned]["how"] == "adopted"
    nothing = snodo_cli("protocol", "sign", "--yes", cwd=git_repo)
    assert nothing.returncode == 0 and "no change under .snodo/ to sign" in nothing.stderr, nothing
    assert git(git_repo, "rev-parse", "HEAD").strip() == adoption


def test_a_first_list_committed_unsigned_is_not_in_force_until_signed(git_repo: Path, snodo_cli: Cli) -> None:
    assert snodo_cli("init", cwd=git_repo).returncode == 0
    (git_repo / ".snodo" / "allowed_signers").write_text(snodo_cli("keys", "show", cwd=git_repo).stdout)
    git(git_repo, "add", ".snodo")
    git(git_repo, "commit", "-qm", "protocol and my keys, unsigned")
    unsigned = git(git_repo, "rev-parse", "HEAD").strip()
    run = snodo_cli("run", "add a hello module", "--mock", cwd=git_repo)
    assert run.returncode == 4 and f"commit {unsigned[:12]} brings the first" in run.stderr, run
    assert "snodo protocol sign" in run.stderr
    assert snodo_cli("protocol", "sign", "--yes", cwd=git_repo).returncode == 0
    assert snodo_cli("run", "add a hello module", "--mock", cwd=git_repo).returncode == 0


def test_a_replaced_home_is_said_to_be_a_new_identity(
    git_repo: Path, snodo_cli: Cli, snodo_home: Path, tmp_path: Path
) -> None:
    bootstrap(git_repo, snodo_cli)
    assert snodo_cli("run", "add a hello module", "--mock", cwd=git_repo).returncode == 0
    quiet = snodo_cli("protocol", "check", cwd=git_repo)
    assert "keys were just made" not in quiet.stderr and "not in the project's" not in quiet.stderr, quiet

    new_home = tmp_path / "home-made-again"  # the old one deleted by mistake
    env = {"SNODO_HOME": str(new_home)}
    first = snodo_cli("run", "add another module", "--mock", cwd=git_repo, env=env)
    assert first.returncode == 4, first
    assert first.stderr.count("is new: its keys were just made") == 1, first.stderr
    assert "the home's keys were replaced" in first.stderr and "restore its keys/" in first.stderr, first.stderr
    later = snodo_cli("protocol", "check", cwd=git_repo, env=env)
    assert later.stderr.count("not in the project's .snodo/allowed_signers in force") == 1, later.stderr
    assert "snodo keys show >> .snodo/allowed_signers && snodo protocol sign" in later.stderr
    assert os.listdir(new_home / "keys")  # the new keys are kept: the notice says what they are
    shown = json.loads(snodo_cli("keys", "show", "--json", cwd=git_repo, env=env).stdout)
    assert shown["allowed_signers_line"] not in (git_repo / ".snodo" / "allowed_signers").read_text()


def test_a_list_made_before_keys_listed_namespace_git_is_never_a_dead_end(git_repo: Path, snodo_cli: Cli) -> None:
    """The report this comes from: a committed list naming the keys for decisions and
    attestations only. Nothing could ever be in force; now every step says what to do."""
    assert snodo_cli("init", cwd=git_repo).returncode == 0
    shown = snodo_cli("keys", "show", cwd=git_repo).stdout
    (git_repo / ".snodo" / "allowed_signers").write_text(shown.replace('"snodo-decision,git"', '"snodo-decision"'))
    git(git_repo, "add", ".snodo")
    git(git_repo, "commit", "-qm", "trust my keys")
    committed = git(git_repo, "rev-parse", "HEAD").strip()
    run = snodo_cli("run", "add a hello module", "--mock", cwd=git_repo)
    assert run.returncode == 4 and f"commit {committed[:12]}" in run.stderr and "snodo protocol sign" in run.stderr
    sign = snodo_cli("protocol", "sign", "--yes", cwd=git_repo)
    assert sign.returncode == 4 and "not for namespace git" in sign.stderr, sign
    assert 'namespaces=\\"snodo-decision,git\\"' in sign.stderr or 'namespaces="snodo-decision,git"' in sign.stderr
    (git_repo / ".snodo" / "allowed_signers").write_text(shown)
    assert snodo_cli("protocol", "sign", "--yes", "-m", "trust my key for signed commits", cwd=git_repo).returncode == 0
    assert snodo_cli("run", "add a hello module", "--mock", cwd=git_repo).returncode == 0
