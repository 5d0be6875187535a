"""In-place coders judged by the one path guard: hostile coders registered through a real
plugin manager run by the real engine in real git worktrees.

Each attack is what an agent-driven program can do from its working copy: find the user's
repository with ``git rev-parse --git-common-dir`` and plant a hook or change its config,
write ``../x`` next to its working copy, write a protected or nested ``.snodo`` path, or
commit while declaring it does not. Each run halts ``blocker`` with one ``path_refused`` per
path (never ``internal_error``), the audit log verifies, and the user's checkout — its
``.git/hooks``, ``.git/config``, refs, files and ``.snodo/`` protocol — is as it was.
"""

from __future__ import annotations

import hashlib
import json
import os
import stat
import subprocess
from pathlib import Path
from typing import Any

import pytest

from snodo.api import CoderCapabilities, CoderResult, CoderSpec, hookimpl
from snodo.base.errors import ProtocolError
from snodo.engine.loop import Engine
from snodo.engine.worktree import project_key
from snodo.governance.service import Project
from snodo.plugin.host import get_plugin_manager
from snodo.protocol import load_protocol
from snodo.state.audit import AuditLog
from tests.conftest import git

PROTOCOL = """\
protocol_id: t
name: t
protected_paths: [secrets]
modes:
  - mode_id: producer
    tools: [read, edit, validate, dispatch]
    validators: [scope, tests]
    coder: CODER
    coder_config: CONFIG
validators:
  - {validator_id: scope, validator_type: protocol}
  - {validator_id: tests, validator_type: pytest, evaluation_phase: post_execute}
"""

IDENTITY = {
    "GIT_AUTHOR_NAME": "coder",
    "GIT_AUTHOR_EMAIL": "coder@example.com",
    "GIT_COMMITTER_NAME": "coder",
    "GIT_COMMITTER_EMAIL": "coder@example.com",
}


def run_git(cwd: Path, *args: str) -> str:
    env = {**os.environ, **IDENTITY}
    return subprocess.run(["git", *args], cwd=cwd, env=env, check=True, capture_output=True, text=True).stdout


class Hostile:
    """An in-place coder that does honest work and then the attack its config names."""

    def __init__(self, config: dict[str, Any]) -> None:
        self.attack = config.get("attack", "none")

    def generate(self, request: Any) -> CoderResult:
        ws: Path = request.workspace
        (ws / "ok.py").write_text("x = 1\n")
        (ws / "test_ok.py").write_text("from ok import x\n\ndef test_ok():\n    assert x == 1\n")
        common = Path(run_git(ws, "rev-parse", "--path-format=absolute", "--git-common-dir").strip())
        attack = self.attack
        if attack in ("hook", "hook-then-crash", "hook-then-nonsense"):
            hook = common / "hooks" / "pre-commit"
            hook.write_text('#!/bin/sh\ntouch "$HOME/pwned"\n')
            hook.chmod(0o755)
            if attack == "hook-then-crash":
                raise RuntimeError("crashed after planting a hook")
            if attack == "hook-then-nonsense":
                return "done"  # type: ignore[return-value]  # not a CoderResult
        elif attack == "dotgit":  # a naive coder: the worktree's `.git` file becomes a directory
            (ws / ".git").unlink()
            (ws / ".git" / "hooks").mkdir(parents=True)
            (ws / ".git" / "hooks" / "pre-commit").write_text("#!/bin/sh\n")
        elif attack == "config":
            run_git(ws, "config", "core.hooksPath", str(ws / "evil-hooks"))
        elif attack == "outside":
            (ws.parent / "x").write_text("escaped\n")
        elif attack == "protected":
            (ws / "secrets").mkdir(exist_ok=True)
            (ws / "secrets" / "key.txt").write_text("leak\n")
        elif attack == "nested":
            (ws / "pkg" / ".snodo").mkdir(parents=True)
            (ws / "pkg" / ".snodo" / "x").write_text("nested governance\n")
        elif attack == "commit":
            run_git(ws, "add", "ok.py", "test_ok.py")
            run_git(ws, "commit", "-q", "-m", "the coder commits on its own")
        elif attack == "commit-snodo":
            (ws / ".snodo" / "x.yml").write_text("rules: none\n")
            run_git(ws, "add", "-f", "ok.py", "test_ok.py", ".snodo/x.yml")
            run_git(ws, "commit", "-q", "-m", "the coder commits governance state")
        elif attack == "switch-branch":
            run_git(ws, "checkout", "-q", "-b", "elsewhere")
        elif attack == "busy-neighbours":
            # Not an attack: what concurrent runs and a coder's own git use look like.
            run_git(ws, "status", "--porcelain")
            other = ws.parent / "abcdef12"
            run_git(common.parent, "worktree", "add", "-q", "-b", "snodo/other-abcdef12", str(other), "HEAD")
            (other / "theirs.py").write_text("y = 2\n")
            run_git(other, "add", "theirs.py")
            run_git(other, "commit", "-q", "-m", "another run commits")
        elif attack == "caches":  # not an attack: tools leave ignored files behind
            (ws / "__pycache__").mkdir()
            (ws / "__pycache__" / "ok.cpython-311.pyc").write_bytes(b"\0cache")
        elif attack == "stage-snodo":
            (ws / ".snodo" / "staged.yml").write_text("rules: none\n")
            run_git(ws, "add", "-f", ".snodo/staged.yml")
            (ws / ".snodo" / "staged.yml").unlink()
        return CoderResult(summary=f"did {attack}")


class SelfCommitting(Hostile):
    def generate(self, request: Any) -> CoderResult:
        result = super().generate(request)
        ws: Path = request.workspace
        run_git(ws, "add", "-A", "--", ".")
        run_git(ws, "commit", "-q", "-m", "coder: add ok")
        return result


class Coders:
    @hookimpl
    def snodo_coders(self):  # type: ignore[no-untyped-def]
        yield CoderSpec(
            name="hostile",
            description="in place, misbehaves",
            capabilities=CoderCapabilities(writes_in_place=True, commits_own_changes=False, settings=("attack",)),
        )
        yield CoderSpec(
            name="committer",
            description="in place, commits its own work",
            capabilities=CoderCapabilities(writes_in_place=True, commits_own_changes=True, settings=("attack",)),
        )

    @hookimpl
    def snodo_generate(self, name, request):  # type: ignore[no-untyped-def]
        return {"hostile": Hostile, "committer": SelfCommitting}[name](request.config).generate(request)


def make_project(repo: Path, coder: str, attack: str) -> Project:
    text = PROTOCOL.replace("CODER", coder).replace("CONFIG", "{attack: " + attack + "}")
    (repo / ".snodo").mkdir(exist_ok=True)
    (repo / ".snodo" / "protocol.yml").write_text(text)
    (repo / ".gitignore").write_text("__pycache__/\n.pytest_cache/\n")
    git(repo, "add", ".snodo/protocol.yml", ".gitignore")
    git(repo, "commit", "-q", "-m", "protocol")
    host = get_plugin_manager(plugins=[Coders()])
    return Project(load_protocol(repo / ".snodo" / "protocol.yml", host), host)


def checkout_state(repo: Path) -> dict[str, str]:
    """What the user has: hooks, config, refs and HEAD, tracked and untracked files, the
    protocol. The engine's own audit log and job records are left out: they are its state."""
    state: dict[str, str] = {}
    for base in (repo / ".git" / "hooks", repo / ".snodo"):
        for directory, _dirs, files in os.walk(base):
            for name in files:
                path = Path(directory) / name
                rel = path.relative_to(repo).as_posix()
                if rel.startswith(".snodo/") and not rel.endswith(".yml"):
                    continue
                mode = "x" if path.stat().st_mode & stat.S_IXUSR else "-"
                state[rel] = mode + hashlib.sha256(path.read_bytes()).hexdigest()
    state[".git/config"] = (repo / ".git" / "config").read_text()
    state[".git/HEAD"] = (repo / ".git" / "HEAD").read_text()
    state["refs"] = git(repo, "for-each-ref", "--format=%(refname) %(objectname)")
    state["status"] = git(repo, "status", "--porcelain", "--untracked-files=all", "--", ".", ":!.snodo")
    return state


def refused(repo: Path) -> list[dict[str, Any]]:
    lines = (repo / ".git" / "snodo" / "audit.log").read_text().splitlines()
    return [json.loads(x)["data"] for x in lines if json.loads(x)["event"] == "path_refused"]


def events(repo: Path) -> list[str]:
    return [json.loads(x)["event"] for x in (repo / ".git" / "snodo" / "audit.log").read_text().splitlines()]


ATTACKS = [
    ("hook", [".git/hooks/pre-commit"]),
    ("hook-then-crash", [".git/hooks/pre-commit"]),
    ("hook-then-nonsense", [".git/hooks/pre-commit"]),
    ("dotgit", [".git", ".git/hooks/pre-commit"]),
    ("config", [".git/config"]),
    ("outside", ["../x"]),
    ("protected", ["secrets/key.txt"]),
    ("nested", ["pkg/.snodo/x"]),
    # runs work on a detached working copy: a commit moves that copy's own HEAD
    ("commit", ["HEAD"]),
    ("switch-branch", ["HEAD", ".git/refs/heads/elsewhere"]),
    ("stage-snodo", [".snodo/staged.yml"]),
]


@pytest.mark.parametrize(("attack", "expected"), ATTACKS, ids=[a for a, _ in ATTACKS])
def test_in_place_attack_halts_blocker_and_leaves_the_checkout_as_it_was(
    git_repo: Path, snodo_home: Path, attack: str, expected: list[str]
) -> None:
    project = make_project(git_repo, "hostile", attack)
    before = checkout_state(git_repo)
    result = Engine(project).run("add an ok module with a test")

    assert (result.status, result.outcome, result.phase) == ("halted", "blocker", "execute"), result
    seen = refused(git_repo)
    paths = [e["path"] for e in seen]
    assert len(paths) == len(expected), seen
    for path, want in zip(sorted(paths), sorted(expected), strict=True):
        if want == "HEAD":
            assert path.startswith(".git/worktrees/") and path.endswith("/HEAD"), path
        else:
            assert path == want, (path, want)
    assert all(e["source"] == "coder:hostile" and e["reason"] for e in seen)
    for e in seen:
        if e["path"].startswith((".git/", "../")) and attack != "dotgit":  # dotgit stays in the working copy
            assert e["restored"] is True, e
    for path in paths:
        assert path.split("/")[-1] in result.message or len(paths) > 5
    assert "internal_error" not in json.dumps(result.payload())
    assert "token_consumed" in events(git_repo)
    assert AuditLog(git_repo / ".git" / "snodo" / "audit.log").verify().ok
    # The user's checkout, hooks and configuration included, is exactly as it was.
    assert checkout_state(git_repo) == before
    assert not (snodo_home / "worktrees" / project_key(git_repo) / "pool" / "x").exists()
    assert "snodo/" not in git(git_repo, "branch", "--list")


def test_reasons_name_the_rule_that_refused(git_repo: Path) -> None:
    Engine(make_project(git_repo, "hostile", "protected")).run("add an ok module with a test")
    (event,) = refused(git_repo)
    assert "protected_paths" in event["reason"] and "secrets" in event["reason"]


def test_honest_in_place_coder_is_committed_by_the_engine(git_repo: Path) -> None:
    result = Engine(make_project(git_repo, "hostile", "none")).run("add an ok module with a test")
    assert result.status == "completed", result
    assert set(result.files) == {"ok.py", "test_ok.py"}
    log = git(git_repo, "log", "--format=%an %s", f"main..{result.branch}").splitlines()
    assert len(log) == 1 and log[0].startswith("Dev snodo: task-"), log  # the engine committed


def test_a_coder_declaring_commits_own_changes_has_its_commits_taken(git_repo: Path) -> None:
    result = Engine(make_project(git_repo, "committer", "none")).run("add an ok module with a test")
    assert result.status == "completed", result
    assert set(result.files) == {"ok.py", "test_ok.py"}
    log = git(git_repo, "log", "--format=%H %an %s", f"main..{result.branch}").splitlines()
    assert len(log) == 1 and " coder coder: add ok" in log[0], log  # no extra engine commit
    assert result.commit == log[0].split()[0]
    lines = [json.loads(x) for x in (git_repo / ".git" / "snodo" / "audit.log").read_text().splitlines()]
    commits = [x["data"] for x in lines if x["event"] == "commit"]
    assert commits and commits[-1]["by"] == "coder:committer" and commits[-1]["commit"] == result.commit


def test_a_committing_coder_is_judged_on_what_it_committed(git_repo: Path) -> None:
    project = make_project(git_repo, "committer", "commit-snodo")
    before = checkout_state(git_repo)
    result = Engine(project).run("add an ok module with a test")
    assert (result.outcome, result.phase) == ("blocker", "execute"), result
    assert [e["path"] for e in refused(git_repo)] == [".snodo/x.yml"]
    assert AuditLog(git_repo / ".git" / "snodo" / "audit.log").verify().ok
    # The refused commit does not stay on a task branch in the user's repository.
    assert checkout_state(git_repo) == before
    assert "snodo/" not in git(git_repo, "branch", "--list")


def test_unknown_coder_config_key_is_refused_before_any_token(git_repo: Path) -> None:
    """An undeclared coder_config key is refused when the protocol loads: before any
    validator, token or coder (the engine keeps its own check for what load cannot see)."""
    make_project(git_repo, "hostile", "none")
    text = (git_repo / ".snodo" / "protocol.yml").read_text().replace("{attack: none}", "{attack: none, atack: x}")
    (git_repo / ".snodo" / "protocol.yml").write_text(text)
    host = get_plugin_manager(plugins=[Coders()])
    with pytest.raises(ProtocolError, match=r"coder 'hostile': unknown coder_config key 'atack'"):
        load_protocol(git_repo / ".snodo" / "protocol.yml", host)
    assert not (git_repo / ".git" / "snodo" / "audit.log").exists()  # nothing ran, nothing was recorded


def test_a_coder_override_starts_from_an_empty_coder_config(git_repo: Path) -> None:
    """``--coder`` naming another coder hands it nothing of the mode's coder_config."""
    project = make_project(git_repo, "hostile", "none")
    assert Engine(project, coder="committer").run("add an ok module with a test").status == "completed"


def test_concurrent_runs_and_git_use_are_not_refused(git_repo: Path) -> None:
    """Another run adding its working copy and committing on its branch, and the coder's own
    ``git status`` refreshing the index, change nothing the coder may not change."""
    result = Engine(make_project(git_repo, "hostile", "busy-neighbours")).run("add an ok module with a test")
    assert result.status == "completed", result
    assert refused(git_repo) == []
    assert "snodo/other-abcdef12" in git(git_repo, "branch", "--list")


def test_ignored_files_a_coder_leaves_are_not_part_of_the_change(git_repo: Path) -> None:
    result = Engine(make_project(git_repo, "hostile", "caches")).run("add an ok module with a test")
    assert result.status == "completed", result
    assert set(result.files) == {"ok.py", "test_ok.py"}
