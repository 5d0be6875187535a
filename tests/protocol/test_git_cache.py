"""What git answered about the user's repository, kept under ``$SNODO_HOME/cache/git`` (#26:
fewer git processes): the protocol's history per ``HEAD`` commit; the configuration is asked
once per process. Each call runs in a fresh interpreter (as every `snodo` command does),
behind a ``git`` wrapper that logs every git process started, on a real repository."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import git, write_producer_protocol

WRAPPER = """#!/bin/sh
printf '%s\\n' "$*" >> "{log}"
exec "{git}" "$@"
"""

RESOLVE = """
import json, sys
from pathlib import Path
from snodo.git.runner import pin
from snodo.protocol.committed import resolve
found = resolve(Path(sys.argv[1]), cache_dir=Path(sys.argv[2]))
context = pin(Path(sys.argv[1]).parent)
print(json.dumps({"commit": found.commit, "why": found.not_in_force, "neutral": list(context.neutral)}))
"""


class Resolver:
    def __init__(self, tmp_path: Path, repo: Path) -> None:
        real = shutil.which("git")
        assert real is not None
        self.bin, self.log, self.repo = tmp_path / "bin", tmp_path / "git.log", repo
        self.cache = tmp_path / "home" / "cache" / "git"
        self.bin.mkdir()
        (self.bin / "git").write_text(WRAPPER.format(log=self.log, git=real))
        (self.bin / "git").chmod(0o755)

    def __call__(self) -> tuple[dict[str, object], list[str]]:
        """The protocol in force, and the git subcommands resolving it started."""
        self.log.unlink(missing_ok=True)
        env = {**os.environ, "PATH": f"{self.bin}{os.pathsep}{os.environ['PATH']}"}
        protocol = self.repo / ".snodo" / "protocol.yml"
        done = subprocess.run(
            [sys.executable, "-c", RESOLVE, str(protocol), str(self.cache)],
            env=env,
            capture_output=True,
            text=True,
            timeout=60,
            check=True,
        )
        calls = self.log.read_text().splitlines() if self.log.exists() else []
        return json.loads(done.stdout), [_subcommand(line) for line in calls]


def _subcommand(line: str) -> str:
    words = line.split()
    i = 0
    while i < len(words):
        if words[i] in ("-c", "-C"):
            i += 2
        elif words[i].startswith("-"):
            i += 1
        else:
            return words[i]
    return ""


@pytest.fixture
def resolver(git_repo: Path, tmp_path: Path) -> Resolver:
    write_producer_protocol(git_repo)
    git(git_repo, "add", ".snodo")
    git(git_repo, "commit", "-qm", "protocol")
    return Resolver(tmp_path, git_repo)


def test_a_repeat_at_the_same_head_asks_git_only_where_the_repository_is_and_its_configuration(
    resolver: Resolver,
) -> None:
    head = git(resolver.repo, "rev-parse", "HEAD").strip()
    first, asked = resolver()
    assert first["commit"] == head
    assert asked == ["rev-parse", "config", "log"]
    again, asked = resolver()
    assert again == first
    assert asked == ["rev-parse", "config"]


def test_a_new_commit_is_a_new_key_never_the_old_answer(resolver: Resolver) -> None:
    resolver()
    path = resolver.repo / ".snodo" / "protocol.yml"
    path.write_text(path.read_text().replace("name: t", "name: changed", 1))
    git(resolver.repo, "commit", "-qam", "protocol changed")
    found, asked = resolver()
    assert found["commit"] == git(resolver.repo, "rev-parse", "HEAD").strip()
    assert asked == ["rev-parse", "config", "log"]


def test_a_corrupt_or_foreign_entry_counts_as_absent(resolver: Resolver) -> None:
    first, _ = resolver()
    (entry,) = resolver.cache.glob("*.json")
    entry.write_text("{not json")
    again, asked = resolver()
    assert again == first
    assert asked == ["rev-parse", "config", "log"]
    # the entry now claims to be something else: its key no longer matches its name
    entry.write_text(json.dumps({"key": "0" * 64, "text": ""}))
    assert resolver() == (first, ["rev-parse", "config", "log"])
    huge = {"key": entry.stem, "text": "x" * (2 << 20)}
    entry.write_text(json.dumps(huge))  # bounded: read as absent, never trusted
    assert resolver() == (first, ["rev-parse", "config", "log"])


def test_a_configuration_change_is_read_again_and_its_drivers_neutralised(resolver: Resolver) -> None:
    first, _ = resolver()
    assert first["neutral"] == []
    git(resolver.repo, "config", "filter.evil.clean", "touch /tmp/pwned")
    found, asked = resolver()
    assert "config" in asked
    assert "filter.evil.clean=" in found["neutral"]


def test_a_configuration_that_includes_another_file_is_never_kept(resolver: Resolver, tmp_path: Path) -> None:
    extra = tmp_path / "extra.gitconfig"
    extra.write_text("[user]\n\tname = Someone\n")
    git(resolver.repo, "config", "include.path", str(extra))
    resolver()
    extra.write_text('[filter "later"]\n\tsmudge = touch /tmp/pwned\n')  # the repository's config is unchanged
    found, asked = resolver()
    assert "config" in asked
    assert "filter.later.smudge=" in found["neutral"]


def test_the_trust_rules_answer_is_kept_per_head(resolver: Resolver, tmp_path: Path) -> None:
    key = tmp_path / "alice_key"
    subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", "alice", "-f", str(key)], check=True)
    kind, blob = Path(f"{key}.pub").read_text().split()[:2]
    (resolver.repo / ".snodo" / "allowed_signers").write_text(f"alice {kind} {blob}\n")
    git(resolver.repo, "add", ".snodo")
    sign = ["-c", "gpg.format=ssh", "-c", f"user.signingkey={key}", "commit", "-S"]
    git(resolver.repo, *sign, "-qm", "signers")  # the first list counts signed by a principal it lists
    listed = git(resolver.repo, "rev-parse", "HEAD").strip()
    path = resolver.repo / ".snodo" / "protocol.yml"
    path.write_text(path.read_text().replace("name: t", "name: unsigned", 1))
    git(resolver.repo, "commit", "-qam", "unsigned change")
    first, _ = resolver()
    again, asked = resolver()
    assert first["commit"] == again["commit"] == listed
    assert again["why"] and "not signed" in str(again["why"])
    # the rule's answer is kept per HEAD: nothing in history below HEAD can change it
    assert "log" not in asked and "rev-list" not in asked, asked


def test_pinning_reads_head_in_the_same_process_and_an_unborn_head_as_none(tmp_path: Path) -> None:
    from snodo.git.runner import pin_at_head

    empty = tmp_path / "empty"
    empty.mkdir()
    git(empty, "init", "-q")
    (empty / "HEAD").write_text("a file named like the revision\n")
    context, head = pin_at_head(empty)
    assert context is not None and context.work_tree == empty.resolve()
    assert head is None
    born = tmp_path / "born"
    born.mkdir()
    git(born, "init", "-q")
    git(born, "-c", "user.name=a", "-c", "user.email=a@b", "commit", "-q", "--allow-empty", "-m", "x")
    context, head = pin_at_head(born / ".")
    assert context is not None and head == git(born, "rev-parse", "HEAD").strip()
    assert pin_at_head(born)[1] is None  # pinned before: HEAD may have moved, so it is not told


def test_history_cut_or_grafted_since_is_a_new_key(resolver: Resolver) -> None:
    """A fetch that deepens a shallow clone changes what `git log` sees at the same HEAD."""
    resolver()
    head = git(resolver.repo, "rev-parse", "HEAD").strip()
    (resolver.repo / ".git" / "shallow").write_text(head + "\n")
    found, asked = resolver()
    assert found["commit"] == head
    assert asked == ["rev-parse", "config", "log"]
