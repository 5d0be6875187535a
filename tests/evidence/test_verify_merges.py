"""`snodo verify` computes a merge from the object store alone.

Each test pushes two person-signed commits that conflict and a merge commit whose tree is
what one git knob would make of them "cleanly" (a union or a driver by attribute at any
depth or by configuration, renormalising, a recorded rerere resolution, a replace ref, a
graft, the user's own configuration). The verifier's clone then carries
that knob (in the checkout, in `.git/`, in the configuration) and `snodo verify` must
still refuse the merge, by sha, as one whose parents conflict. An honest clean merge
passes however hostile the checkout is, and so it does through the documented pre-receive
hook, where the pushed objects wait in git's quarantine.

The same World as tests/evidence/test_verify_e2e.py: a bare server, real clones, the
real CLI as a subprocess, `ssh-keygen`-signed commits.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from snodo.evidence.verify import verify as verify_in_process
from snodo.state.keys import openssh_public
from tests.conftest import git
from tests.evidence import test_verify_e2e
from tests.evidence.test_verify_e2e import World, clone, failing, hook_text, snodo, start

pytestmark = test_verify_e2e.pytestmark  # slow, and needs ssh-keygen for the signed commits

world = test_verify_e2e.world  # the same fixture: a server, two clones, a governed run

BASE = "one\ntwo\nthree\n"
OURS = "one\nTWO (ours)\nthree\n"
THEIRS = "one\nTWO (theirs)\nthree\n"
UNION = "one\nTWO (ours)\nTWO (theirs)\nthree\n"
UNION_ATTRIBUTES = "* merge=union\n"

Files = dict[str, str | None]  # path -> text (None: delete it)


def signed(world: World, repo: Path, files: Files, message: str) -> str:
    """A commit by `pat` (listed in the base's allowed_signers), SSH-signed: it passes alone."""
    for path, text in files.items():
        target = repo / path
        if text is None:
            git(repo, "rm", "-q", path)
            continue
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(text.encode())
        git(repo, "add", path)
    key = world.person_key
    git(repo, "-c", "gpg.format=ssh", "-c", f"user.signingkey={key}", "commit", "-q", "-S", "-m", message)
    return git(repo, "rev-parse", "HEAD").strip()


def publish_merge(world: World, name: str, base: Files, ours: Files, theirs: Files, merged: Files) -> str:
    """Branch ``name`` on the server: signed base, signed ours and theirs on it, and an unsigned
    merge of the two whose tree is ``merged`` applied to ours; the merge's sha."""
    repo = start(world, f"{name}-theirs")
    first = signed(world, repo, base, f"{name}: base")
    signed(world, repo, theirs, f"{name}: theirs")
    start(world, name, first)
    signed(world, repo, ours, f"{name}: ours")
    git(repo, "merge", "-q", "--no-ff", "--no-commit", "-s", "ours", f"{name}-theirs")
    for path, text in merged.items():
        if text is None:
            git(repo, "rm", "-q", "--ignore-unmatch", path)
        else:
            (repo / path).parent.mkdir(parents=True, exist_ok=True)
            (repo / path).write_bytes(text.encode())
            git(repo, "add", path)
    git(repo, "commit", "-q", "--no-verify", "-m", f"merge {name}")
    world.publish(repo, name)
    return git(repo, "rev-parse", "HEAD").strip()


def verifier(world: World, name: str) -> Path:
    """A fresh clone with the branch checked out: its work tree holds the merge's files."""
    repo = clone(world.server, world.root / f"verify-{name}")
    git(repo, "checkout", "-q", "--detach", f"origin/{name}")
    return repo


def verify(world: World, repo: Path, name: str, *extra: str) -> subprocess.CompletedProcess[str]:
    return snodo(repo, world.home_b, "verify", f"origin/main..origin/{name}", *extra)


def refused_as_conflict(result: subprocess.CompletedProcess[str], merge: str) -> None:
    lines = failing(result)
    assert list(lines) == [merge[:12]], result.stdout
    assert "a merge whose parents conflict: its resolution was judged by nobody" in lines[merge[:12]]
    assert "-> commit it yourself with a signing key" in lines[merge[:12]]


def write(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)


# Each knob: (how the branch is built, what the verifier's clone is given). A knob in a
# commit's tree is also in the checkout, since the verifier checks the branch out.


def knob_committed(repo: Path, env: pytest.MonkeyPatch) -> None:
    pass  # the `.gitattributes` is in the commits (and so in the checkout): see KNOBS


def knob_config_driver(repo: Path, env: pytest.MonkeyPatch) -> None:
    # A driver of the repository's own: "take theirs".
    git(repo, "config", "merge.theirs.driver", "cp %B %A")
    write(repo / ".git" / "info" / "attributes", "* merge=theirs\n")


def knob_merge_default(repo: Path, env: pytest.MonkeyPatch) -> None:
    git(repo, "config", "merge.default", "union")


def knob_info_attributes(repo: Path, env: pytest.MonkeyPatch) -> None:
    write(repo / ".git" / "info" / "attributes", UNION_ATTRIBUTES)


def knob_attributes_file(repo: Path, env: pytest.MonkeyPatch) -> None:
    write(repo / ".git" / "union-attributes", UNION_ATTRIBUTES)
    git(repo, "config", "core.attributesFile", str(repo / ".git" / "union-attributes"))


def knob_rerere(repo: Path, env: pytest.MonkeyPatch) -> None:
    """rerere on, with the union resolution recorded by resolving the same conflict once."""
    git(repo, "config", "rerere.enabled", "true")
    git(repo, "config", "rerere.autoUpdate", "true")
    git(repo, "checkout", "-q", "-B", "replay", "origin/rerere^1")
    conflicted = subprocess.run(["git", "-C", str(repo), "merge", "-q", "origin/rerere^2"], capture_output=True)
    assert conflicted.returncode != 0
    (repo / "poem.txt").write_text(UNION)
    git(repo, "add", "poem.txt")
    git(repo, "commit", "-q", "--no-edit")
    assert any((repo / ".git" / "rr-cache").iterdir())  # the resolution is on record
    git(repo, "reset", "-q", "--hard", "HEAD^")
    replayed = subprocess.run(["git", "-C", str(repo), "merge", "origin/rerere^2"], capture_output=True, text=True)
    assert "using previous resolution" in replayed.stdout + replayed.stderr
    assert (repo / "poem.txt").read_text() == UNION
    git(repo, "merge", "--abort")
    git(repo, "checkout", "-q", "--detach", "origin/rerere")


def knob_replace_ref(repo: Path, env: pytest.MonkeyPatch) -> None:
    # "theirs" shown as ours: merging ours with itself is ours, the merge's tree.
    git(repo, "replace", git(repo, "rev-parse", "origin/replace^2").strip(), "origin/replace^1")


def knob_graft(repo: Path, env: pytest.MonkeyPatch) -> None:
    # The merge shown with ours twice as its parents: theirs drops out of the range, and
    # merging ours with itself is ours, the merge's tree.
    merge, ours = (git(repo, "rev-parse", f"origin/graft{s}").strip() for s in ("", "^1"))
    write(repo / ".git" / "info" / "grafts", f"{merge} {ours} {ours}\n")


def knob_renormalize(repo: Path, env: pytest.MonkeyPatch) -> None:
    # Ours only turned LF into CRLF: renormalised, it is the base again, and theirs wins.
    git(repo, "config", "merge.renormalize", "true")
    git(repo, "config", "core.autocrlf", "true")
    write(repo / ".gitattributes", "* text=auto eol=lf\n")


def knob_renames_off(repo: Path, env: pytest.MonkeyPatch) -> None:
    # Both sides renamed the same file: without rename detection that is two adds, no conflict.
    git(repo, "config", "merge.renames", "false")
    git(repo, "config", "diff.renames", "false")


def knob_global_config(repo: Path, env: pytest.MonkeyPatch) -> None:
    home = repo.parent / f"home-of-{repo.name}"
    write(home / ".gitconfig", "[merge]\n\tdefault = union\n")
    env.setenv("HOME", str(home))  # for `snodo verify` and the git it starts


POEM = {"poem.txt": BASE}
KNOBS: dict[str, tuple[Callable[[Path, pytest.MonkeyPatch], None], Files, Files, Files, Files]] = {
    # name: (knob, base, ours, theirs, merged)
    "in-tree-union": (
        knob_committed,
        {"poem.txt": BASE, ".gitattributes": UNION_ATTRIBUTES},
        {"poem.txt": OURS},
        {"poem.txt": THEIRS},
        {"poem.txt": UNION},
    ),
    "nested-union": (
        knob_committed,
        {"docs/deep/poem.txt": BASE, "docs/deep/.gitattributes": "*.txt merge=union\n"},
        {"docs/deep/poem.txt": OURS},
        {"docs/deep/poem.txt": THEIRS},
        {"docs/deep/poem.txt": UNION},
    ),
    "config-driver": (knob_config_driver, POEM, {"poem.txt": OURS}, {"poem.txt": THEIRS}, {"poem.txt": THEIRS}),
    "merge-default": (knob_merge_default, POEM, {"poem.txt": OURS}, {"poem.txt": THEIRS}, {"poem.txt": UNION}),
    "info-attributes": (knob_info_attributes, POEM, {"poem.txt": OURS}, {"poem.txt": THEIRS}, {"poem.txt": UNION}),
    "attributes-file": (knob_attributes_file, POEM, {"poem.txt": OURS}, {"poem.txt": THEIRS}, {"poem.txt": UNION}),
    "rerere": (knob_rerere, POEM, {"poem.txt": OURS}, {"poem.txt": THEIRS}, {"poem.txt": UNION}),
    "replace": (knob_replace_ref, POEM, {"poem.txt": OURS}, {"poem.txt": THEIRS}, {"poem.txt": OURS}),
    "graft": (knob_graft, POEM, {"poem.txt": OURS}, {"poem.txt": THEIRS}, {"poem.txt": OURS}),
    "renormalize": (
        knob_renormalize,
        POEM,
        {"poem.txt": BASE.replace("\n", "\r\n")},
        {"poem.txt": THEIRS},
        {"poem.txt": THEIRS},
    ),
    "renames-off": (
        knob_renames_off,
        {"old.txt": BASE},
        {"old.txt": None, "ours.txt": BASE},
        {"old.txt": None, "theirs.txt": BASE},
        {"theirs.txt": BASE},
    ),
    "global-config": (knob_global_config, POEM, {"poem.txt": OURS}, {"poem.txt": THEIRS}, {"poem.txt": UNION}),
}


#: The knobs git's own `merge-tree`, run in the verifier's clone, obeys. rerere acts on
#: `git merge` (shown in its knob), and git 2.39's merge-ort detects renames whatever
#: `merge.renames` says: both are tested all the same, for the git that would obey them.
PLAIN_GIT_MERGES_CLEANLY = set(KNOBS) - {"rerere", "renames-off"}


@pytest.mark.parametrize("name", list(KNOBS))
def test_no_knob_outside_the_object_store_makes_conflicting_parents_merge(
    world: World, name: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    knob, base, ours, theirs, merged = KNOBS[name]
    merge = publish_merge(world, name, base, ours, theirs, merged)
    repo = verifier(world, name)
    knob(repo, monkeypatch)
    if name in PLAIN_GIT_MERGES_CLEANLY:  # the knob is real: git left to itself takes the bait
        plain = subprocess.run(
            ["git", "-C", str(repo), "merge-tree", "--write-tree", f"{merge}^1", f"{merge}^2"],
            capture_output=True,
            text=True,
        )
        assert (plain.returncode, plain.stdout.strip()) == (0, git(repo, "rev-parse", f"{merge}^{{tree}}").strip())
    refused_as_conflict(verify(world, repo, name), merge)


HOOKS = ("pre-merge-commit", "post-merge", "post-checkout", "reference-transaction", "pre-auto-gc", "post-rewrite")


def hostile(repo: Path, marker: Path) -> None:
    """Every knob at once, and hooks that would leave ``marker`` if any ran; and `-merge`, which
    turns every change to the same file into a conflict, with a filter that fails."""
    attributes = "* -merge ident filter=evil diff=evil text eol=crlf conflict-marker-size=3\n"
    write(repo / ".gitattributes", attributes)
    write(repo / ".git" / "info" / "attributes", attributes)
    git(repo, "config", "filter.evil.clean", "false")
    git(repo, "config", "filter.evil.required", "true")
    git(repo, "config", "merge.default", "binary")
    git(repo, "config", "merge.renormalize", "true")
    git(repo, "config", "merge.renames", "false")
    git(repo, "config", "merge.conflictStyle", "diff3")
    git(repo, "config", "core.ignoreCase", "true")
    git(repo, "config", "core.autocrlf", "true")
    git(repo, "config", "core.safecrlf", "true")
    git(repo, "config", "rerere.enabled", "true")
    hooks = repo / ".git" / "hooks"
    for hook in HOOKS:
        write(hooks / hook, f"#!/bin/sh\necho {hook} >> {marker}\nexit 1\n")
        (hooks / hook).chmod(0o755)
    git(repo, "config", "core.hooksPath", str(hooks))


def test_an_honest_clean_merge_passes_however_hostile_the_checkout(world: World) -> None:
    lines = "one\ntwo\nthree\nfour\nfive\n"
    merge = publish_merge(
        world,
        "honest",
        {"poem.txt": lines, "old.txt": BASE},
        {"poem.txt": lines.replace("one", "ONE"), "old.txt": None, "new.txt": BASE},  # a rename
        {"poem.txt": lines.replace("five", "FIVE")},
        {"poem.txt": lines.replace("one", "ONE").replace("five", "FIVE")},
    )
    repo = verifier(world, "honest")
    marker = world.root / "hook-ran"
    hostile(repo, marker)
    before = sorted((repo / ".git").rglob("*"))
    result = verify(world, repo, "honest", "--json")
    assert result.returncode == 0, result.stdout + result.stderr
    rows = {r["sha"]: r["how"] for r in json.loads(result.stdout)["commits"]}
    assert rows[merge] == "merge" and list(rows.values()).count("signature") == 3
    assert not marker.exists(), marker.read_text()
    # The merge was computed without writing to the verifier's repository (no object, no rr-cache).
    assert sorted((repo / ".git").rglob("*")) == before


def test_the_pre_receive_gate_recomputes_merges_from_the_pushed_objects(world: World) -> None:
    # The server exists before the branches: their objects reach it only in the push, where
    # they wait in git's quarantine while the hook runs.
    server = world.root / "gated.git"
    subprocess.run(["git", "clone", "-q", "--mirror", str(world.server), str(server)], check=True)
    (server / "hooks" / "pre-receive").write_text(hook_text())
    (server / "hooks" / "pre-receive").chmod(0o755)
    # The server's own attributes and configuration would merge anything.
    write(server / "info" / "attributes", UNION_ATTRIBUTES)
    subprocess.run(["git", "-C", str(server), "config", "merge.default", "union"], check=True)
    union = publish_merge(world, "gate-union", POEM, {"poem.txt": OURS}, {"poem.txt": THEIRS}, {"poem.txt": UNION})
    honest = publish_merge(
        world, "gate", {"a.txt": "a\n", "b.txt": "b\n"}, {"a.txt": "A\n"}, {"b.txt": "B\n"}, {"b.txt": "B\n"}
    )
    env = {**os.environ, "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}"}

    def push(sha: str) -> subprocess.CompletedProcess[str]:
        argv = ["git", "-C", str(world.a), "push", "--force", str(server), f"{sha}:refs/heads/gate"]
        return subprocess.run(argv, env=env, capture_output=True, text=True)

    refused = push(union)
    assert refused.returncode != 0 and "pre-receive hook declined" in refused.stderr, refused.stderr
    assert f"{union[:12]} " in refused.stderr and "parents conflict" in refused.stderr
    accepted = push(honest)
    assert accepted.returncode == 0, accepted.stderr
    assert git(server, "rev-parse", "refs/heads/gate").strip() == honest


def test_a_sha256_repository_is_recomputed_in_its_own_object_format(tmp_path: Path) -> None:
    repo = tmp_path / "sha256"
    subprocess.run(["git", "init", "-q", "--object-format=sha256", "-b", "main", str(repo)], check=True)
    git(repo, "config", "user.email", "pat@example.com")
    git(repo, "config", "user.name", "pat")
    key = openssh_public(Ed25519PrivateKey.generate().public_key())
    write(repo / ".snodo" / "allowed_signers", f"pat {key}\n")
    write(repo / "poem.txt", BASE)
    git(repo, "add", ".")
    git(repo, "commit", "-q", "-m", "base")

    def branch(name: str, text: str) -> None:
        git(repo, "checkout", "-q", "-b", name, "main")
        write(repo / "poem.txt", text)
        git(repo, "commit", "-q", "-am", name)

    branch("ours", OURS)
    branch("theirs", THEIRS)
    branch("other", BASE + "four\n")
    # The checkout and the configuration would make the conflicting pair merge as a union.
    write(repo / ".gitattributes", UNION_ATTRIBUTES)
    git(repo, "config", "merge.default", "union")
    git(repo, "checkout", "-q", "ours")
    git(repo, "merge", "-q", "-m", "union", "theirs")  # "clean", through the union driver
    union = git(repo, "rev-parse", "HEAD").strip()
    git(repo, "checkout", "-q", "-B", "honest", "theirs")
    git(repo, "merge", "-q", "-m", "honest", "other")
    honest = git(repo, "rev-parse", "HEAD").strip()
    assert len(union) == len(honest) == 64
    for merge, passed, reason in ((union, False, "parents conflict"), (honest, True, "")):
        (row,) = (v for v in verify_in_process(repo, f"main..{merge}").verdicts if v.sha == merge)
        assert (row.passed, row.how) == (passed, "merge" if passed else "") and reason in row.reason
