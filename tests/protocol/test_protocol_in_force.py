"""The protocol in force comes from history (issue 28.6): committed at HEAD, and with
``.snodo/allowed_signers`` only changes whose commit carries a good SSH signature by a
listed principal. Real git repositories, real ssh-keygen signatures, git's own verification."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from snodo.base.errors import ProtocolError
from snodo.protocol.committed import digest, refuse_drift, resolve
from tests.conftest import git, write_producer_protocol

PROTOCOL = Path(".snodo") / "protocol.yml"


def _key(tmp_path: Path, name: str) -> Path:
    key = tmp_path / f"{name}_key"
    subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", name, "-f", str(key)], check=True)
    return key


def _signers_line(name: str, key: Path) -> str:
    kind, blob = (key.with_suffix(".pub") if key.suffix else Path(f"{key}.pub")).read_text().split()[:2]
    return f"{name} {kind} {blob}\n"


def _commit(repo: Path, message: str, key: Path | None = None) -> str:
    git(repo, "add", "-A", ".snodo")
    sign = ["-c", "gpg.format=ssh", "-c", f"user.signingkey={key}", "commit", "-S"] if key else ["commit"]
    git(repo, *sign, "-qm", message)
    return git(repo, "rev-parse", "HEAD").strip()


def test_never_committed_is_read_from_the_working_tree_with_a_warning(git_repo: Path) -> None:
    write_producer_protocol(git_repo)
    state = resolve(git_repo / PROTOCOL)
    assert state.commit is None and state.drift is None
    assert state.warning and "never committed" in state.warning
    assert state.digest == digest((git_repo / PROTOCOL).read_text())


def test_an_uncommitted_edit_is_drift_that_serve_and_run_refuse(git_repo: Path, snodo_cli) -> None:  # type: ignore[no-untyped-def]
    write_producer_protocol(git_repo)
    commit = _commit(git_repo, "protocol")
    path = git_repo / PROTOCOL
    committed = path.read_text()
    path.write_text(committed.replace("validators: [scope, tests]", "validators: [scope]"))
    state = resolve(path)
    assert state.commit == commit and state.text == committed and state.digest == digest(committed)
    assert (
        state.drift and "1 line(s) added, 1 removed" in state.drift and "-    validators: [scope, tests]" in state.drift
    )
    with pytest.raises(ProtocolError) as info:
        refuse_drift(path, state)
    assert "commit it" in str(info.value.hint)
    # validate judges with the committed version and says so; its event records which one
    r = snodo_cli("validate", "add a module", "--json", cwd=git_repo)
    assert "judging with the committed protocol" in r.stderr, r
    events = [json.loads(line) for line in (git_repo / ".snodo" / "audit.log").read_text().splitlines()]
    validate = [e["data"] for e in events if e["event"] == "validate"][-1]
    assert validate["protocol_commit"] == commit and validate["protocol_sha256"] == digest(committed)
    checked = snodo_cli("protocol", "check", "--json", cwd=git_repo).json()
    assert checked["in_force"]["commit"] == commit and "differs" in checked["in_force"]["drift"]


def test_with_allowed_signers_only_signed_changes_count(git_repo: Path, tmp_path: Path) -> None:
    alice, mallory = _key(tmp_path, "alice"), _key(tmp_path, "mallory")
    write_producer_protocol(git_repo)
    (git_repo / ".snodo" / "allowed_signers").write_text(_signers_line("alice", alice))
    first = _commit(git_repo, "protocol and the team's signers", key=alice)  # signed by a principal it lists
    path = git_repo / PROTOCOL
    original = path.read_text()

    path.write_text(original.replace("validators: [scope, tests]", "validators: [scope]"))
    unsigned = _commit(git_repo, "drop the tests validator, unsigned")
    state = resolve(path)
    assert state.commit == first and state.text == original
    assert state.not_in_force and unsigned[:12] in state.not_in_force and "not signed" in state.not_in_force
    with pytest.raises(ProtocolError) as info:
        refuse_drift(path, state)
    assert "not signed" in "\n".join(info.value.problems)

    path.write_text(original.replace("validators: [scope, tests]", "validators: [tests]"))
    forged = _commit(git_repo, "signed by someone not listed", key=mallory)
    state = resolve(path)
    assert (
        state.commit == first
        and forged[:12] in str(state.not_in_force)
        and "not in the list" in str(state.not_in_force)
    )

    path.write_text(path.read_text() + "# reviewed by alice\n")
    signed = _commit(git_repo, "alice signs the change", key=alice)
    state = resolve(path)
    assert state.commit == signed and state.not_in_force is None and state.drift is None
    assert "validators: [tests]" in state.text
