"""What resolving the protocol in force asks git (#26: fewer git processes): the
configuration is asked once per process. Each call runs in a fresh interpreter (as every `snodo` command does),
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
found = resolve(Path(sys.argv[1]))
context = pin(Path(sys.argv[1]).parent)
print(json.dumps({"commit": found.commit, "why": found.not_in_force, "neutral": list(context.neutral)}))
"""


class Resolver:
    def __init__(self, tmp_path: Path, repo: Path) -> None:
        real = shutil.which("git")
        assert real is not None
        self.bin, self.log, self.repo = tmp_path / "bin", tmp_path / "git.log", repo
        self.bin.mkdir()
        (self.bin / "git").write_text(WRAPPER.format(log=self.log, git=real))
        (self.bin / "git").chmod(0o755)

    def __call__(self) -> tuple[dict[str, object], list[str]]:
        """The protocol in force, and the git subcommands resolving it started."""
        self.log.unlink(missing_ok=True)
        env = {**os.environ, "PATH": f"{self.bin}{os.pathsep}{os.environ['PATH']}"}
        protocol = self.repo / ".snodo" / "protocol.yml"
        done = subprocess.run(
            [sys.executable, "-c", RESOLVE, str(protocol)],
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


def test_resolving_asks_git_where_the_repository_is_its_configuration_and_the_history(resolver: Resolver) -> None:
    head = git(resolver.repo, "rev-parse", "HEAD").strip()
    first, asked = resolver()
    assert first["commit"] == head
    assert asked == ["rev-parse", "config", "log"]


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
