"""Evidence travels with the work, end to end: a bare repository as the server, two clones
with two homes. A's audit key is listed on `main`; A runs a governed task and pushes branch
and notes; B, with no key of A's, verifies the range. Then each way of passing off work
that no governed run judged is refused by name, and a person's SSH-signed commit passes.

Every step is the real thing: `snodo run --mock`, `snodo push`, `snodo verify` as
subprocesses, a real MCP client against `snodo serve`, `ssh-keygen`-signed commits, and the
docs' pre-receive hook refusing a real `git push`.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import REPO, git, write_producer_protocol
from tests.mcp.mcp_harness import serve

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(shutil.which("ssh-keygen") is None, reason="ssh-keygen is needed for signed commits"),
]


def snodo(cwd: Path, home: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "SNODO_HOME": str(home), "COLUMNS": "200", "LITELLM_LOCAL_MODEL_COST_MAP": "True"}
    return subprocess.run(
        [sys.executable, "-m", "snodo", *args], cwd=cwd, env=env, capture_output=True, text=True, timeout=180
    )


def clone(server: Path, where: Path) -> Path:
    subprocess.run(["git", "clone", "-q", str(server), str(where)], check=True, capture_output=True)
    git(where, "config", "user.email", f"{where.name}@example.com")
    git(where, "config", "user.name", where.name)
    return where


class World:
    def __init__(self, root: Path) -> None:
        self.root = root
        self.server = root / "server.git"
        self.home_a, self.home_b, self.home_c = (root / f"home-{n}" for n in "abc")
        for home in (self.home_a, self.home_b, self.home_c):
            home.mkdir()
        self.person_key = root / "pat_ed25519"
        self.stranger_key = root / "eve_ed25519"
        self.branch = ""
        self.commit = ""
        self.a = self.b = root

    def fetch_b(self) -> None:
        git(self.b, "fetch", "-q", "--prune", "origin", "+refs/notes/snodo:refs/notes/snodo")
        git(self.b, "fetch", "-q", "--prune", "origin")

    def verify_b(self, branch: str, *extra: str) -> subprocess.CompletedProcess[str]:
        self.fetch_b()
        return snodo(self.b, self.home_b, "verify", f"origin/main..origin/{branch}", *extra)

    def publish(self, repo: Path, branch: str, *, force_notes: bool = False) -> None:
        """Push ``branch`` and the notes of ``repo`` to the server, as an attacker could."""
        git(repo, "push", "-q", "--force", "origin", f"HEAD:refs/heads/{branch}")
        if git(repo, "notes", "--ref=refs/notes/snodo", "list").strip():
            git(repo, "push", "-q", *(["--force"] if force_notes else []), "origin", "refs/notes/snodo")


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory) -> World:
    w = World(tmp_path_factory.mktemp("evidence"))
    subprocess.run(["git", "init", "-q", "--bare", "-b", "main", str(w.server)], check=True)
    for key, who in ((w.person_key, "pat"), (w.stranger_key, "eve")):
        subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", who, "-f", str(key)], check=True)
    seed = clone(w.server, w.root / "seed")
    write_producer_protocol(seed)
    lines = snodo(seed, w.home_a, "keys", "show", "--name", "ada")
    assert lines.returncode == 0, lines.stderr
    assert 'namespaces="snodo-decision,git"' in lines.stdout and 'namespaces="snodo-attestation"' in lines.stdout
    person = Path(f"{w.person_key}.pub").read_text().split()
    (seed / ".snodo" / "allowed_signers").write_text(lines.stdout + f'pat namespaces="git" {person[0]} {person[1]}\n')
    (seed / "README.md").write_text("# project\n")
    git(seed, "add", "README.md")
    git(seed, "commit", "-q", "-m", "readme")
    signed = snodo(seed, w.home_a, "protocol", "sign", "--yes", "-m", "protocol and trusted signers")
    assert signed.returncode == 0, signed.stderr  # a first list is in force once a principal it lists signs it
    git(seed, "push", "-q", "origin", "main")
    w.a = clone(w.server, w.root / "clone-a")
    w.b = clone(w.server, w.root / "clone-b")
    run = snodo(w.a, w.home_a, "run", "add a hello module", "--mock", "--json")
    assert run.returncode == 0, run.stdout + run.stderr
    w.branch = json.loads(run.stdout)["branch"]
    w.commit = git(w.a, "rev-parse", w.branch).strip()
    pushed = snodo(w.a, w.home_a, "push", "origin", w.branch)
    assert pushed.returncode == 0, pushed.stdout + pushed.stderr
    return w


def failing(result: subprocess.CompletedProcess[str]) -> dict[str, str]:
    """``short sha -> line`` of the commits `snodo verify` refused."""
    assert result.returncode == 1, result.stdout + result.stderr
    return {line.split()[0]: line for line in result.stdout.splitlines() if line.strip()}


def start(world: World, name: str, at: str = "origin/main") -> Path:
    git(world.a, "checkout", "-q", "-B", name, at)
    return world.a


def test_a_governed_run_verifies_on_another_machine(world: World) -> None:
    result = world.verify_b(world.branch, "--json")
    assert result.returncode == 0, result.stdout + result.stderr
    table: dict[str, Any] = json.loads(result.stdout)
    (row,) = table["commits"]
    assert row["sha"] == world.commit and row["how"] == "attestation" and row["signer"] == "ada"
    shown = snodo(world.b, world.home_b, "attest", "show", f"origin/{world.branch}", "--json")
    predicate = json.loads(shown.stdout)["statement"]["predicate"]
    assert predicate["judged"] is True and predicate["mode"] == "producer" and predicate["coder"]["name"] == "mock"
    assert [v["validator_id"] for v in predicate["validators"]] == ["tests"]
    assert predicate["audit"]["seq"] > 0 and len(predicate["audit"]["hash"]) == 64


def test_an_amended_commit_is_refused(world: World) -> None:
    repo = start(world, "amended", world.commit)
    (repo / "hello.py").write_text("def hello():\n    return 'pwned'\n")
    git(repo, "add", "hello.py")
    # notes.rewriteRef copies the note onto the amended commit: it still names the original.
    git(repo, "-c", "notes.rewriteRef=refs/notes/snodo", "commit", "-q", "--amend", "--no-edit")
    world.publish(repo, "amended")
    lines = failing(world.verify_b("amended"))
    sha = git(repo, "rev-parse", "HEAD").strip()
    assert f"attestation is for commit {world.commit[:12]}" in lines[sha[:12]]


def test_an_attested_commit_cherry_picked_onto_another_tree_is_refused(world: World) -> None:
    repo = start(world, "picked")
    (repo / "other.txt").write_text("another base\n")
    git(repo, "add", "other.txt")
    git(repo, "-c", "commit.gpgsign=false", "commit", "-q", "-m", "another base")
    base = git(repo, "rev-parse", "HEAD").strip()
    git(repo, "cherry-pick", world.commit)
    picked = git(repo, "rev-parse", "HEAD").strip()
    git(repo, "notes", "--ref=refs/notes/snodo", "copy", "--force", world.commit, picked)
    world.publish(repo, "picked")
    lines = failing(world.verify_b("picked"))
    assert "tree" in lines[picked[:12]] and f"attestation is for commit {world.commit[:12]}" in lines[picked[:12]]
    assert "no attestation" in lines[base[:12]] and "not signed by a person" in lines[base[:12]]


def test_a_commit_through_the_mcp_commit_tool_is_refused(world: World) -> None:
    repo = start(world, "via-mcp")
    with serve(repo, world.home_a, "--mode", "producer") as agent:
        agent.ok("write_file", {"path": "backdoor.py", "content": "import os\n"})
        agent.ok("stage_files", {"paths": ["backdoor.py"]})
        sha = agent.ok("commit", {"message": "add a helper"})["commit"]
    world.publish(repo, "via-mcp")
    lines = failing(world.verify_b("via-mcp"))
    assert "made through the tool surface (`commit` in mode producer" in lines[sha[:12]]
    assert "judged: false" in lines[sha[:12]]


def test_a_plain_unsigned_commit_is_refused(world: World) -> None:
    repo = start(world, "plain", world.commit)
    (repo / "plain.txt").write_text("x\n")
    git(repo, "add", "plain.txt")
    git(repo, "commit", "-q", "-m", "plain")
    world.publish(repo, "plain")
    result = world.verify_b("plain")
    lines = failing(result)
    sha = git(repo, "rev-parse", "HEAD").strip()
    assert list(lines) == [sha[:12]]  # the governed commit below it still passes
    assert "no attestation" in lines[sha[:12]] and "not signed by a person" in lines[sha[:12]]


def test_an_attestation_by_a_key_not_on_main_is_refused_even_if_the_branch_lists_it(world: World) -> None:
    repo = clone(world.server, world.root / "clone-c")  # mallory's machine, her own home
    git(repo, "fetch", "-q", "origin", "+refs/notes/snodo:refs/notes/snodo")
    run = snodo(repo, world.home_c, "run", "add a hello module", "--mock", "--json")
    assert run.returncode == 0, run.stdout + run.stderr
    assert run.stderr.count("is new: its keys were just made") == 1, run.stderr  # said once, with what to do
    branch = json.loads(run.stdout)["branch"]
    git(repo, "checkout", "-q", branch)
    governed = git(repo, "rev-parse", "HEAD").strip()
    lines = snodo(repo, world.home_c, "keys", "show", "--name", "mallory").stdout
    with open(repo / ".snodo" / "allowed_signers", "a") as fh:
        fh.write(lines)
    git(repo, "add", ".snodo/allowed_signers")
    git(repo, "commit", "-q", "-m", "trust mallory")
    listing = git(repo, "rev-parse", "HEAD").strip()
    # her own listing is not in force for her runs either, and she cannot sign it in
    again = snodo(repo, world.home_c, "run", "add another module", "--mock")
    assert again.returncode == 4 and listing[:12] in again.stderr and "snodo protocol sign" in again.stderr, again
    assert again.stderr.count("not in the project's .snodo/allowed_signers in force") == 1, again.stderr
    sign = snodo(repo, world.home_c, "protocol", "sign", "--yes")
    assert sign.returncode == 4 and "not listed" in sign.stderr, sign.stderr
    world.publish(repo, "stranger")
    refused = failing(world.verify_b("stranger"))
    why = refused[governed[:12]]
    assert "that the base's allowed_signers does not list for attestations" in why, why
    # what to do is not what she already did (list the key on her own branch)
    assert "counts only once it is on the base" in why and "snodo protocol sign" in why, why
    assert f"commit {listing[:12]} changes .snodo/ without a good signature" in refused[listing[:12]]
    assert "snodo protocol sign" in refused[listing[:12]]


def test_a_rewritten_notes_ref_cannot_move_an_attestation(world: World) -> None:
    repo = start(world, "moved", world.commit)
    (repo / "evil.py").write_text("import os\n")
    git(repo, "add", "evil.py")
    git(repo, "commit", "-q", "-m", "unjudged")
    evil = git(repo, "rev-parse", "HEAD").strip()
    blob = git(repo, "notes", "--ref=refs/notes/snodo", "list", world.commit).strip()
    git(repo, "notes", "--ref=refs/notes/snodo", "add", "--force", "-C", blob, evil)
    world.publish(repo, "moved", force_notes=True)
    lines = failing(world.verify_b("moved"))
    assert f"attestation is for commit {world.commit[:12]}" in lines[evil[:12]]


def signed_commit(world: World, repo: Path, key: Path, path: str, message: str) -> str:
    (repo / path).parent.mkdir(parents=True, exist_ok=True)
    (repo / path).write_text(message + "\n", encoding="utf-8")
    git(repo, "add", path)
    git(repo, "-c", "gpg.format=ssh", "-c", f"user.signingkey={key}", "commit", "-q", "-S", "-m", message)
    return git(repo, "rev-parse", "HEAD").strip()


def test_a_persons_ssh_signed_commit_passes_and_a_strangers_does_not(world: World) -> None:
    repo = start(world, "person", world.commit)
    mine = signed_commit(world, repo, world.person_key, ".snodo/notes.txt", "pat edits the governance dir")
    world.publish(repo, "person")
    result = world.verify_b("person", "--json")
    assert result.returncode == 0, result.stdout + result.stderr
    rows = {r["sha"]: r for r in json.loads(result.stdout)["commits"]}
    assert rows[mine]["how"] == "signature" and rows[mine]["signer"] == "pat"
    assert rows[world.commit]["how"] == "attestation"
    theirs = signed_commit(world, repo, world.stranger_key, "eve.txt", "eve was here")
    world.publish(repo, "person")
    lines = failing(world.verify_b("person"))
    assert list(lines) == [theirs[:12]] and "which the base's allowed_signers does not list" in lines[theirs[:12]]


def test_a_clean_merge_passes_and_a_merge_that_adds_its_own_change_does_not(world: World) -> None:
    repo = start(world, "side", "origin/main")
    side = signed_commit(world, repo, world.person_key, "side.txt", "pat's side change")
    start(world, "merged", world.commit)
    git(repo, "merge", "-q", "--no-ff", "-m", "merge side", "side")
    clean = git(repo, "rev-parse", "HEAD").strip()
    world.publish(repo, "merged")
    result = world.verify_b("merged", "--json")
    assert result.returncode == 0, result.stdout + result.stderr
    rows = {r["sha"]: r["how"] for r in json.loads(result.stdout)["commits"]}
    assert rows == {clean: "merge", side: "signature", world.commit: "attestation"}
    # An "evil merge": the merge commit carries a change neither parent has.
    git(repo, "reset", "-q", "--hard", "HEAD^")
    git(repo, "merge", "-q", "--no-ff", "--no-commit", "side")
    (repo / "hello.py").write_text("def hello():\n    return 'smuggled'\n")
    git(repo, "add", "hello.py")
    git(repo, "commit", "-q", "-m", "merge side")
    evil = git(repo, "rev-parse", "HEAD").strip()
    world.publish(repo, "merged")
    lines = failing(world.verify_b("merged"))
    assert list(lines) == [evil[:12]] and "tree differs from merging its parents" in lines[evil[:12]]


def test_the_envelope_verifies_with_securesystemslib_and_the_public_key_alone(world: World) -> None:
    import base64

    from cryptography.hazmat.primitives import serialization
    from securesystemslib.dsse import Envelope
    from securesystemslib.exceptions import VerificationError
    from securesystemslib.signer import SSlibKey

    world.fetch_b()  # not left to an earlier test: the tests of a module may run on other workers
    note = git(world.b, "notes", "--ref=refs/notes/snodo", "show", world.commit)
    audit_line = next(
        line
        for line in (world.root / "seed" / ".snodo" / "allowed_signers").read_text().splitlines()
        if "snodo-attestation" in line
    )
    public = serialization.load_ssh_public_key(" ".join(audit_line.split()[2:4]).encode())
    envelope = Envelope.from_dict(json.loads(note))
    keyid = next(iter(envelope.signatures))
    key = SSlibKey.from_crypto(public, keyid=keyid)  # type: ignore[arg-type]
    assert envelope.verify([key], 1) == {keyid: key}
    assert envelope.payload_type == "application/vnd.in-toto+json"
    statement = json.loads(envelope.payload)
    assert statement["_type"] == "https://in-toto.io/Statement/v1"
    tree = git(world.b, "rev-parse", f"{world.commit}^{{tree}}").strip()
    assert {"name": "commit", "digest": {"gitCommit": world.commit}} in statement["subject"]
    assert {"name": "tree", "digest": {"gitTree": tree}} in statement["subject"]
    # One changed byte of the payload and the same verifier refuses it.
    forged = json.loads(note)
    forged["payload"] = base64.b64encode(envelope.payload.replace(b'"judged":true', b'"judged":True')).decode()
    with pytest.raises(VerificationError):
        Envelope.from_dict(forged).verify([key], 1)


def hook_text() -> str:
    doc = (REPO / "docs" / "ci.md").read_text(encoding="utf-8")
    found = re.search(r"<!-- pre-receive hook: begin -->\n```sh\n(.*?)```\n<!-- pre-receive hook: end -->", doc, re.S)
    assert found, "docs/ci.md lost its pre-receive hook"
    return found.group(1)


def test_the_docs_pre_receive_hook_refuses_unattested_work_and_accepts_governed_work(world: World) -> None:
    server = world.root / "hooked.git"
    subprocess.run(["git", "clone", "-q", "--mirror", str(world.server), str(server)], check=True)
    hook = server / "hooks" / "pre-receive"
    hook.write_text(hook_text())
    hook.chmod(0o755)
    repo = start(world, "hooked-plain", world.commit)
    (repo / "plain.txt").write_text("unjudged\n")
    git(repo, "add", "plain.txt")
    git(repo, "commit", "-q", "-m", "unjudged")
    env = {**os.environ, "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}"}
    refused = subprocess.run(
        ["git", "-C", str(repo), "push", str(server), "HEAD:refs/heads/feature"],
        env=env,
        capture_output=True,
        text=True,
    )
    assert refused.returncode != 0 and "pre-receive hook declined" in refused.stderr, refused.stderr
    assert "no attestation" in refused.stderr
    assert subprocess.run(["git", "-C", str(server), "rev-parse", "--verify", "-q", "refs/heads/feature"]).returncode
    # A fresh governed run: notes first, then the branch (what `snodo push` does).
    git(repo, "checkout", "-q", "-B", "hooked-run", "origin/main")
    run = snodo(repo, world.home_a, "run", "add a greeting module", "--mock", "--json")
    assert run.returncode == 0, run.stdout + run.stderr
    branch = json.loads(run.stdout)["branch"]
    for what in ("refs/notes/snodo", f"refs/heads/{branch}"):
        pushed = subprocess.run(
            ["git", "-C", str(repo), "push", "--force", str(server), what], env=env, capture_output=True, text=True
        )
        assert pushed.returncode == 0, pushed.stderr
    assert git(server, "rev-parse", branch).strip() == git(repo, "rev-parse", branch).strip()
