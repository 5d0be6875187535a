"""The hardened git runner: no setting or file in the repository chooses a program it runs.

Each test configures a real repository so that plain git would run a payload (shown by
running plain git last), then drives :func:`snodo.git.runner.run_git` and checks the payload
never ran.
"""

from __future__ import annotations

import signal
import subprocess
from pathlib import Path

import pytest

from snodo.git.runner import pin, pinned, run_git
from tests.workspace.conftest import git


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    root = tmp_path / "repo"
    root.mkdir()
    git(root, "init", "-q", "-b", "main")
    (root / "a.txt").write_text("one\n")
    git(root, "add", "-A")
    git(root, "commit", "-q", "-m", "initial")
    return root


def script(tmp_path: Path, name: str, body: str = "") -> tuple[Path, Path]:
    marker = tmp_path / f"{name}-RAN"
    program = tmp_path / f"{name}.sh"
    program.write_text(f"#!/bin/sh\ntouch '{marker}'\n{body}")
    program.chmod(0o755)
    return program, marker


def plain(root: Path, *args: str) -> None:
    """git as a user runs it (no hardening)."""
    subprocess.run(["git", "-C", str(root), *args], capture_output=True, check=False)


def test_fsmonitor_hooks_and_external_diff_never_run(tmp_path: Path, repo: Path) -> None:
    fsmonitor, fs_marker = script(tmp_path, "fsmonitor")
    differ, diff_marker = script(tmp_path, "differ")
    hook, hook_marker = script(tmp_path, "hook")
    git(repo, "config", "core.fsmonitor", str(fsmonitor))
    git(repo, "config", "diff.external", str(differ))
    (repo / ".githooks").mkdir()
    (repo / ".githooks" / "pre-commit").write_text(f"#!/bin/sh\nexec '{hook}'\n")
    (repo / ".githooks" / "pre-commit").chmod(0o755)
    git(repo, "config", "core.hooksPath", ".githooks")
    (repo / "a.txt").write_text("two\n")
    assert run_git(repo, "status", "--porcelain").ok
    assert "two" in run_git(repo, "diff").stdout
    assert run_git(repo, "add", "a.txt").ok
    assert run_git(repo, "-c", "user.name=a", "-c", "user.email=a@b", "commit", "-q", "-m", "x").ok
    assert not (fs_marker.exists() or diff_marker.exists() or hook_marker.exists())
    plain(repo, "status")
    plain(repo, "diff", "HEAD~1")
    plain(repo, "-c", "user.name=a", "-c", "user.email=a@b", "commit", "-q", "--allow-empty", "-m", "y")
    assert fs_marker.exists() and diff_marker.exists() and hook_marker.exists()


def test_filter_and_merge_drivers_picked_by_gitattributes_never_run(tmp_path: Path, repo: Path) -> None:
    clean, clean_marker = script(tmp_path, "clean", "cat\n")
    merger, merge_marker = script(tmp_path, "merger")
    git(repo, "config", "filter.evil.clean", str(clean))
    git(repo, "config", "filter.evil.required", "true")
    git(repo, "config", "merge.evil.driver", str(merger))
    (repo / ".gitattributes").write_text("*.txt filter=evil merge=evil\n")
    (repo / "b.txt").write_text("raw\n")
    assert run_git(repo, "add", "-A").ok
    assert run_git(repo, "-c", "user.name=a", "-c", "user.email=a@b", "commit", "-q", "-m", "attrs").ok
    assert run_git(repo, "show", "HEAD:b.txt").stdout == "raw\n"
    run_git(repo, "branch", "side")
    for branch, text in (("side", "side\n"), ("main", "main\n")):
        run_git(repo, "checkout", "-q", branch)
        (repo / "a.txt").write_text(text)
        run_git(repo, "-c", "user.name=a", "-c", "user.email=a@b", "commit", "-q", "-am", branch)
    merged = run_git(repo, "-c", "user.name=a", "-c", "user.email=a@b", "merge", "--no-edit", "side")
    assert not merged.ok  # the driver became `false`: a conflict, not the agent's program
    run_git(repo, "merge", "--abort")
    assert not (clean_marker.exists() or merge_marker.exists())
    (repo / "b.txt").write_text("changed\n")
    plain(repo, "add", "b.txt")
    assert clean_marker.exists()


def test_the_callers_git_environment_is_not_passed(tmp_path: Path, repo: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    other = tmp_path / "other"
    other.mkdir()
    git(other, "init", "-q")
    monkeypatch.setenv("GIT_DIR", str(other / ".git"))
    monkeypatch.setenv("GIT_CONFIG_PARAMETERS", "'core.fsmonitor'='touch /tmp/x'")
    assert Path(run_git(repo, "rev-parse", "--absolute-git-dir").stdout.strip()) == (repo / ".git").resolve()


def test_a_git_dir_planted_after_the_pin_is_never_discovered(repo: Path) -> None:
    app = repo / "app"
    app.mkdir()
    (app / "x.txt").write_text("x\n")
    pin(app)
    git(app, "init", "-q")  # planted below the pinned work tree
    assert pinned(app) is not None
    top = run_git(app, "rev-parse", "--show-toplevel").stdout.strip()
    assert Path(top) == repo.resolve()
    assert run_git(app, "add", "x.txt").ok
    assert not (app / ".git" / "index").exists()  # the planted repository was never written to


def test_a_linked_worktree_below_a_pinned_repository_keeps_its_own_git_dir(repo: Path) -> None:
    pin(repo)
    git(repo, "worktree", "add", "-q", "--detach", str(repo / "wt"), "HEAD")
    own = run_git(repo / "wt", "rev-parse", "--absolute-git-dir").stdout.strip()
    assert Path(own) == (repo / ".git" / "worktrees" / "wt").resolve()


def test_the_agents_git_tools_are_hardened_the_same_way(tmp_path: Path, repo: Path) -> None:
    """The second door: the MCP git tools (``snodo.workspace.Git``: status, diff, stage,
    commit) reach git only through :func:`run_git`, so the same hostile configuration runs
    nothing through them either (docs/architecture.md, "Git" row)."""
    from snodo.workspace import Git, PathGuard

    fsmonitor, fs_marker = script(tmp_path, "fsmonitor")
    differ, diff_marker = script(tmp_path, "differ")
    hook, hook_marker = script(tmp_path, "hook")
    git(repo, "config", "core.fsmonitor", str(fsmonitor))
    git(repo, "config", "diff.external", str(differ))
    (repo / ".githooks").mkdir()
    for name in ("pre-commit", "commit-msg", "post-commit"):
        (repo / ".githooks" / name).write_text(f"#!/bin/sh\nexec '{hook}'\n")
        (repo / ".githooks" / name).chmod(0o755)
    git(repo, "config", "core.hooksPath", ".githooks")
    (repo / "a.txt").write_text("two\n")
    tools = Git(repo, PathGuard(repo))
    assert tools.get_status()
    assert "two" in tools.read_diff()
    tools.stage_files(["a.txt"])
    assert tools.commit("through the agent's tools")
    assert not (fs_marker.exists() or diff_marker.exists() or hook_marker.exists())
    plain(repo, "status")  # the configuration is live: plain git runs the payload
    assert fs_marker.exists()


SIGNATURES = {
    "gpg.program": "-----BEGIN PGP SIGNATURE-----\n\nAAAA\n-----END PGP SIGNATURE-----",
    "gpg.openpgp.program": "-----BEGIN PGP SIGNATURE-----\n\nAAAA\n-----END PGP SIGNATURE-----",
    "gpg.x509.program": "-----BEGIN SIGNED MESSAGE-----\nAAAA\n-----END SIGNED MESSAGE-----",
    "gpg.ssh.program": "-----BEGIN SSH SIGNATURE-----\nAAAA\n-----END SSH SIGNATURE-----",
}


@pytest.mark.parametrize("key", sorted(SIGNATURES))
def test_no_signature_program_the_repository_names_ever_runs(tmp_path: Path, repo: Path, key: str) -> None:
    """A commit carrying a signature makes git start its format's program when it shows or
    checks the signature; the repository's configuration naming that program (or the key
    command, the allowed-signers file) chooses nothing snodo's git runs."""
    program, marker = script(tmp_path, key.replace(".", "-"))
    git(repo, "config", key, str(program))
    git(repo, "config", "gpg.ssh.defaultKeyCommand", str(program))
    (tmp_path / "signers").write_text(
        "a@b ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIOaFb1Q6Kx1qXDbhS9XeGmRyQ4aLeQ6Cq3Gv8N1Gq9r4\n"
    )
    git(repo, "config", "gpg.ssh.allowedSignersFile", str(tmp_path / "signers"))
    head = git(repo, "cat-file", "commit", "HEAD").strip()
    headers, _, message = head.partition("\n\n")
    signature = SIGNATURES[key].replace("\n", "\n ")
    text = f"{headers}\ngpgsig {signature}\n\n{message}\n"
    signed = subprocess.run(
        ["git", "-C", str(repo), "hash-object", "-t", "commit", "-w", "--stdin"],
        input=text,
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
    checked = run_git(repo, "log", "-1", "--format=%G? %GK", signed)
    # git pipes the commit to ssh-keygen's check-novalidate without ignoring SIGPIPE: by timing, that
    # one may kill it (signature_checks drains it; tests/protocol/test_trust_rule.py). Nothing else may.
    assert checked.ok or (key == "gpg.ssh.program" and checked.returncode == -signal.SIGPIPE), checked
    run_git(repo, "verify-commit", signed)
    run_git(repo, "show", "--show-signature", "-s", signed)
    run_git(repo, "-c", "log.showSignature=true", "log", "-1", signed)
    assert not marker.exists()
    plain(repo, "log", "-1", "--format=%G?", signed)  # the configuration is live: plain git runs it
    assert marker.exists()
