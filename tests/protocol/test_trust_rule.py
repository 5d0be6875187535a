"""One trust rule, one walk: the in-force check that `run`, `serve` and `validate` use and
`snodo verify` agree about every commit of a history. Each history is a real repository
whose `.snodo/` changes are signed (or not) with a person's own git SSH signing key
(`git commit -S`, `gpg.format=ssh`), judged at each commit as `run` judges it (the
in-force check at that checkout) and by `snodo verify` over the whole range."""

from __future__ import annotations

import shutil
import subprocess
from collections.abc import Callable
from pathlib import Path

import pytest

from snodo.base.errors import ProtocolError
from snodo.protocol.committed import refuse_drift, resolve
from snodo.protocol.trust import signature_checks
from tests.conftest import CliResult, git, write_producer_protocol

pytestmark = pytest.mark.skipif(shutil.which("ssh-keygen") is None, reason="git checks SSH signatures with ssh-keygen")

PROTOCOL = Path(".snodo") / "protocol.yml"


class History:
    def __init__(self, repo: Path, tmp_path: Path) -> None:
        self.repo = repo
        self.alice = tmp_path / "alice_key"
        subprocess.run(
            ["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", "alice", "-f", str(self.alice)], check=True
        )
        self.base = git(repo, "rev-parse", "HEAD").strip()

    def list_alice(self) -> None:
        kind, blob = Path(f"{self.alice}.pub").read_text().split()[:2]
        (self.repo / ".snodo" / "allowed_signers").write_text(f'alice namespaces="git" {kind} {blob}\n')

    def edit(self, line: str) -> None:
        path = self.repo / PROTOCOL
        path.write_text(path.read_text() + line + "\n")

    def commit(self, message: str, *, signed: bool, empty: bool = False) -> str:
        git(self.repo, "add", "-A", ".snodo")
        sign = ["-c", "gpg.format=ssh", "-c", f"user.signingkey={self.alice}", "commit", "-S"] if signed else ["commit"]
        git(self.repo, *sign, *(["--allow-empty"] if empty else []), "-qm", message)
        return git(self.repo, "rev-parse", "HEAD").strip()

    def first_list(self, *, signed: bool) -> str:
        write_producer_protocol(self.repo)
        self.list_alice()
        return self.commit("protocol and alice", signed=signed)


def run_view(repo: Path, commit: str) -> str | None:
    """What `run` says at ``commit``: ``None`` when the .snodo/ there is in force, else its refusal."""
    git(repo, "checkout", "-q", "--detach", commit)
    try:
        refuse_drift(repo / PROTOCOL, resolve(repo / PROTOCOL))  # as `run` and `serve` start
    except ProtocolError as refused:
        return f"{refused}\n{refused.hint}"
    return None


def agree(history: History, snodo_cli: Callable[..., CliResult]) -> dict[str, tuple[str | None, dict[str, str]]]:
    """Both views of every commit after the base, checked to agree; returned for the specifics."""
    repo = history.repo
    last = git(repo, "rev-parse", "HEAD").strip()
    verdicts = {
        c["sha"]: c for c in snodo_cli("verify", f"{history.base}..{last}", "--json", cwd=repo).json()["commits"]
    }
    views = {sha: (run_view(repo, sha), verdict) for sha, verdict in verdicts.items()}
    for sha, (refusal, verdict) in views.items():
        named = refusal is not None and f"commit {sha[:12]}" in refusal
        refused_by_rule = f"commit {sha[:12]}" in verdict["reason"] or verdict["how"] == "adopted"
        assert named == refused_by_rule, (sha, refusal, verdict)
        if verdict["passed"] and verdict["how"] == "signature":
            assert refusal is None, (sha, refusal)  # verify trusts it: its .snodo/ is in force for run
        if refusal is not None and named:
            assert "snodo protocol sign" in refusal
            # refused by verify too, with the same remedy, unless a later signed commit adopted it
            assert verdict["how"] == "adopted" or "snodo protocol sign" in verdict["action"]
    git(repo, "checkout", "-q", last)
    return views


def test_an_unsigned_change(git_repo: Path, tmp_path: Path, snodo_cli) -> None:  # type: ignore[no-untyped-def]
    h = History(git_repo, tmp_path)
    first = h.first_list(signed=True)
    h.edit("# unsigned")
    unsigned = h.commit("unsigned", signed=False)
    views = agree(h, snodo_cli)
    assert views[first][0] is None and views[first][1]["passed"]
    assert not views[unsigned][1]["passed"] and "not signed" in views[unsigned][1]["reason"]


def test_a_signed_change(git_repo: Path, tmp_path: Path, snodo_cli) -> None:  # type: ignore[no-untyped-def]
    h = History(git_repo, tmp_path)
    h.first_list(signed=True)
    h.edit("# signed")
    signed = h.commit("signed", signed=True)
    views = agree(h, snodo_cli)
    assert views[signed] == (None, views[signed][1]) and views[signed][1]["signer"] == "alice"
    assert resolve(git_repo / PROTOCOL).commit == signed


def test_a_first_list_unsigned_then_signed_by_a_principal_it_lists(git_repo: Path, tmp_path: Path, snodo_cli) -> None:  # type: ignore[no-untyped-def]
    h = History(git_repo, tmp_path)
    unsigned = h.first_list(signed=False)
    views = agree(h, snodo_cli)
    refusal = views[unsigned][0]
    assert refusal is not None and "brings the first .snodo/allowed_signers" in refusal
    assert "no committed version of the protocol is in force" in refusal  # nothing was in force before it
    adoption = h.commit("alice signs the list", signed=True, empty=True)
    views = agree(h, snodo_cli)
    assert views[adoption][0] is None and views[adoption][1]["how"] == "signature"
    assert views[unsigned][1]["how"] == "adopted"


def test_a_first_list_signed_by_someone_it_does_not_list_is_not_in_force(  # type: ignore[no-untyped-def]
    git_repo: Path, tmp_path: Path, snodo_cli
) -> None:
    h = History(git_repo, tmp_path)
    write_producer_protocol(git_repo)
    subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(tmp_path / "bob_key")], check=True)
    kind, blob = (tmp_path / "bob_key.pub").read_text().split()[:2]
    (git_repo / ".snodo" / "allowed_signers").write_text(f'bob namespaces="git" {kind} {blob}\n')
    by_alice = h.commit("alice signs a list naming only bob", signed=True)
    views = agree(h, snodo_cli)
    assert views[by_alice][0] is not None and "signed by a key not in the list" in str(views[by_alice][0])


def test_a_return_to_an_older_signed_snodo_needs_a_new_signature(git_repo: Path, tmp_path: Path, snodo_cli) -> None:  # type: ignore[no-untyped-def]
    h = History(git_repo, tmp_path)
    old = h.first_list(signed=True)
    h.edit("# the newer rules")
    newer = h.commit("newer, signed", signed=True)
    git(git_repo, "checkout", "-q", old, "--", ".snodo")
    back = h.commit("back to the old rules, unsigned", signed=False)
    views = agree(h, snodo_cli)
    assert views[newer][0] is None
    assert views[back][0] is not None and f"commit {back[:12]}" in str(views[back][0])
    assert resolve(git_repo / PROTOCOL).commit == newer  # what stays in force is the newer signed version


def test_commits_after_a_refused_change_inherit_the_refusal_until_it_is_signed_or_undone(  # type: ignore[no-untyped-def]
    git_repo: Path, tmp_path: Path, snodo_cli
) -> None:
    h = History(git_repo, tmp_path)
    first = h.first_list(signed=True)
    h.edit("# unsigned")
    unsigned = h.commit("unsigned", signed=False)
    (git_repo / "app.py").write_text("x = 1\n")
    git(git_repo, "add", "app.py")
    git(git_repo, "commit", "-qm", "ordinary work on top")
    on_top = git(git_repo, "rev-parse", "HEAD").strip()
    assert f"commit {unsigned[:12]}" in str(run_view(git_repo, on_top))  # still the same commit to sign
    git(git_repo, "checkout", "-q", on_top)
    git(git_repo, "checkout", "-q", first, "--", ".snodo")
    undone = h.commit("undo the unsigned change", signed=False)
    views = agree(h, snodo_cli)
    assert views[undone][0] is None  # back to what is in force: nothing to sign


def test_a_signature_ssh_keygen_cannot_parse_is_bad_not_a_failure_to_check(git_repo: Path, tmp_path: Path) -> None:
    """git pipes the commit to ``ssh-keygen`` without ignoring SIGPIPE when no listed principal
    matches: a malformed signature on a large commit used to kill the whole check, the good
    signature beside it unread."""
    history = History(git_repo, tmp_path)
    good = history.first_list(signed=True)
    headers, _, message = git(git_repo, "cat-file", "commit", good).partition("\n\n")
    headers = "\n".join(line for line in headers.split("\n") if not line.startswith(("gpgsig", " ")))
    malformed = "-----BEGIN SSH SIGNATURE-----\nAAAA\n-----END SSH SIGNATURE-----".replace("\n", "\n ")
    forged = subprocess.run(
        ["git", "-C", str(git_repo), "hash-object", "-t", "commit", "-w", "--stdin"],
        input=f"{headers}\ngpgsig {malformed}\n\n{message}{'y' * 200_000}\n",
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
    signers = (git_repo / ".snodo" / "allowed_signers").read_text()
    checked = signature_checks(git_repo, signers, [forged, good], source="allowed_signers")
    assert checked[good][0] == "G" and checked[good][2] == "alice"
    assert checked[forged][0] not in ("G", "N"), checked[forged]
