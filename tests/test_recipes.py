"""The recipes users copy, run for real: the GitHub action's script (``scripts/ci-verify.sh``)
against a real repository with a bare "origin", and the pre-commit hooks through
``pre-commit try-repo`` on this repository.

The world: a bare origin whose ``main`` trusts the home that runs governed work; one branch
made by a governed run (``snodo run --mock``) and pushed with its attestation by
``snodo push``; one branch with a plain, unsigned commit. CI sees them as a checkout does.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from tests.conftest import REPO, git, write_producer_protocol

pytestmark = pytest.mark.slow

SCRIPT = REPO / "scripts" / "ci-verify.sh"
BIN = str(Path(sys.executable).parent)  # where this environment's `snodo` command is


def env_for(home: Path, **extra: str) -> dict[str, str]:
    return {
        **os.environ,
        "SNODO_HOME": str(home),
        "COLUMNS": "200",
        "PATH": f"{BIN}{os.pathsep}{os.environ['PATH']}",
        **extra,
    }


def snodo(cwd: Path, home: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "snodo", *args], cwd=cwd, env=env_for(home), capture_output=True, text=True, timeout=180
    )


class World:
    def __init__(self, root: Path) -> None:
        self.root = root
        self.origin = root / "origin.git"
        self.home = root / "dev-home"
        self.main = self.governed = self.plain = ""
        self.clone = root / "dev"


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory) -> World:
    w = World(tmp_path_factory.mktemp("recipes"))
    w.home.mkdir()
    subprocess.run(["git", "init", "-q", "--bare", "-b", "main", str(w.origin)], check=True)
    subprocess.run(["git", "clone", "-q", str(w.origin), str(w.clone)], check=True, capture_output=True)
    git(w.clone, "config", "user.email", "dev@example.com")
    git(w.clone, "config", "user.name", "Dev")
    write_producer_protocol(w.clone)
    keys = snodo(w.clone, w.home, "keys", "show", "--name", "dev")
    assert keys.returncode == 0, keys.stderr
    (w.clone / ".snodo" / "allowed_signers").write_text(keys.stdout)
    (w.clone / "README.md").write_text("# project\n")
    git(w.clone, "add", "README.md")
    git(w.clone, "commit", "-q", "-m", "readme")
    signed = snodo(w.clone, w.home, "protocol", "sign", "-m", "protocol and trusted signers", "--yes")
    assert signed.returncode == 0, signed.stdout + signed.stderr
    git(w.clone, "push", "-q", "origin", "main")
    w.main = git(w.clone, "rev-parse", "HEAD").strip()

    run = snodo(w.clone, w.home, "run", "add a hello module", "--mock", "--json")
    assert run.returncode == 0, run.stdout + run.stderr
    branch = next(line.split('"')[3] for line in run.stdout.splitlines() if line.strip().startswith('"branch"'))
    pushed = snodo(w.clone, w.home, "push", "origin", branch)
    assert pushed.returncode == 0, pushed.stdout + pushed.stderr
    w.governed = git(w.clone, "rev-parse", branch).strip()

    git(w.clone, "checkout", "-q", "-b", "plain", "main")
    (w.clone / "plain.txt").write_text("not governed\n")
    git(w.clone, "add", "plain.txt")
    git(w.clone, "-c", "commit.gpgsign=false", "commit", "-q", "-m", "a plain commit")
    git(w.clone, "push", "-q", "origin", "plain")
    w.plain = git(w.clone, "rev-parse", "HEAD").strip()
    return w


def ci_checkout(world: World, where: Path, head: str) -> Path:
    """What actions/checkout leaves: a shallow clone at the head, no notes, no base branch."""
    subprocess.run(["git", "init", "-q", str(where)], check=True)
    git(where, "remote", "add", "origin", f"file://{world.origin}")
    git(where, "fetch", "-q", "--depth", "1", "origin", head)
    git(where, "checkout", "-q", "--detach", head)
    return where


def ci_verify(checkout: Path, home: Path, **variables: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        ["bash", str(SCRIPT)], cwd=checkout, env=env_for(home, **variables), capture_output=True, text=True, timeout=300
    )


def test_the_ci_script_passes_a_governed_pull_request(world: World, tmp_path: Path) -> None:
    checkout = ci_checkout(world, tmp_path / "ci", world.governed)
    assert git(checkout, "rev-parse", "--is-shallow-repository").strip() == "true"
    (tmp_path / "ci-home").mkdir()
    result = ci_verify(checkout, tmp_path / "ci-home", SNODO_BASE=world.main, SNODO_HEAD=world.governed)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "1 of 1 commit(s) pass" in result.stdout + result.stderr


def test_the_ci_script_fails_an_unsigned_commit(world: World, tmp_path: Path) -> None:
    checkout = ci_checkout(world, tmp_path / "ci", world.plain)
    (tmp_path / "ci-home").mkdir()
    result = ci_verify(checkout, tmp_path / "ci-home", SNODO_BASE=world.main, SNODO_HEAD=world.plain)
    assert result.returncode == 1, result.stdout + result.stderr
    assert world.plain[:12] in result.stdout and "no attestation" in result.stdout, result.stdout


def test_the_ci_script_says_what_it_needs(world: World, tmp_path: Path) -> None:
    checkout = ci_checkout(world, tmp_path / "ci", world.plain)
    result = ci_verify(checkout, tmp_path)
    assert result.returncode != 0 and "SNODO_BASE" in result.stderr, result.stderr


def test_the_action_installs_the_base_distribution_and_runs_that_script() -> None:
    action = yaml.safe_load((REPO / "action.yml").read_text())
    assert action["runs"]["using"] == "composite"
    inputs = action["inputs"]
    assert inputs["package"]["default"] == "snodo-governance"
    assert inputs["base"]["default"] == "${{ github.event.pull_request.base.sha }}"
    assert inputs["head"]["default"] == "${{ github.event.pull_request.head.sha }}"
    install, verify = action["runs"]["steps"][1:]
    assert install["env"] == {"SNODO_PACKAGE": "${{ inputs.package }}"} and '"$SNODO_PACKAGE"' in install["run"]
    assert verify["run"] == '"$GITHUB_ACTION_PATH/scripts/ci-verify.sh"'
    assert verify["env"]["SNODO_BASE"] == "${{ inputs.base }}" and verify["env"]["SNODO_HEAD"] == "${{ inputs.head }}"
    assert os.access(SCRIPT, os.X_OK)  # the step runs it directly


# ------------------------------------------------------------------ pre-commit


class HookRepo:
    """This checkout as pre-commit fetches it: a repository at one commit, and pre-commit's home."""

    def __init__(self, path: Path, rev: str, home: Path) -> None:
        self.path, self.rev, self.home = path, rev, home


def pre_commit(checkout: Path, home: Path, hooks: HookRepo, *args: str) -> subprocess.CompletedProcess[str]:
    # PIP_* of this machine (its index mirror, its cache) reach the hook's own `pip install`
    env = env_for(home, PRE_COMMIT_HOME=str(hooks.home))
    return subprocess.run(
        [sys.executable, "-m", "pre_commit", "try-repo", str(hooks.path), *args, "--ref", hooks.rev],
        cwd=checkout,
        env=env,
        capture_output=True,
        text=True,
        timeout=900,
    )


@pytest.fixture(scope="module")
def hook_repo(tmp_path_factory: pytest.TempPathFactory) -> HookRepo:
    """The files of this checkout (committed or not, as ``git`` would add them) committed once,
    so that pre-commit installs the hooks' environment once for every test here (a repository
    with uncommitted changes gets a new shadow commit, and a new environment, per call)."""
    try:
        import pre_commit  # noqa: F401
    except ImportError:
        pytest.skip("pre-commit is not installed here (pip install pre-commit): the hooks are not tried")
    root = tmp_path_factory.mktemp("hook-repo")
    listed = subprocess.run(
        ["git", "-C", str(REPO), "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
        check=True,
        capture_output=True,
    ).stdout.decode()
    snapshot = root / "snodo"
    for name in filter(None, listed.split("\0")):
        source = REPO / name
        if source.is_file():
            (snapshot / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(source, snapshot / name)
    git(snapshot.parent, "init", "-q", str(snapshot))
    git(snapshot, "add", "-A")
    git(snapshot, "-c", "user.name=t", "-c", "user.email=t@example.com", "commit", "-q", "-m", "snapshot")
    return HookRepo(snapshot, git(snapshot, "rev-parse", "HEAD").strip(), root / "pre-commit-home")


def installed(result: subprocess.CompletedProcess[str], hooks: HookRepo) -> None:
    """Skip, saying why, when pre-commit could not install the hook (no package index here)."""
    if result.returncode != 0 and "An unexpected error has occurred" in result.stdout + result.stderr:
        log = hooks.home / "pre-commit.log"
        pytest.skip(f"pre-commit could not install the hook here: {(log.read_text() if log.exists() else '')[-600:]}")


def test_pre_commit_runs_the_protocol_check(world: World, tmp_path: Path, hook_repo: HookRepo) -> None:
    checkout = tmp_path / "work"
    subprocess.run(["git", "clone", "-q", str(world.origin), str(checkout)], check=True, capture_output=True)
    (tmp_path / "home").mkdir()
    passed = pre_commit(checkout, tmp_path / "home", hook_repo, "snodo-protocol-check", "--all-files")
    installed(passed, hook_repo)
    assert passed.returncode == 0, passed.stdout + passed.stderr
    assert "snodo protocol check" in passed.stdout and "Passed" in passed.stdout, passed.stdout
    protocol = checkout / ".snodo" / "protocol.yml"
    protocol.write_text(protocol.read_text() + "no_such_key: 1\n")  # strict loading refuses it
    git(checkout, "add", ".snodo/protocol.yml")
    failed = pre_commit(checkout, tmp_path / "home", hook_repo, "snodo-protocol-check", "--all-files")
    assert failed.returncode == 1, failed.stdout + failed.stderr
    assert "Failed" in failed.stdout and "no_such_key" in failed.stdout, failed.stdout


def test_pre_commit_verifies_the_pushed_range(world: World, hook_repo: HookRepo) -> None:
    # the developer's own clone: its notes hold the governed run's attestation
    push = ("snodo-verify", "--hook-stage", "pre-push", "--from-ref", world.main)
    governed = pre_commit(world.clone, world.home, hook_repo, *push, "--to-ref", world.governed)
    installed(governed, hook_repo)
    assert governed.returncode == 0, governed.stdout + governed.stderr
    assert "Passed" in governed.stdout, governed.stdout
    plain = pre_commit(world.clone, world.home, hook_repo, *push, "--to-ref", world.plain)
    assert plain.returncode == 1, plain.stdout + plain.stderr
    assert "no attestation" in plain.stdout, plain.stdout


def test_the_hooks_are_the_documented_commands() -> None:
    hooks = {h["id"]: h for h in yaml.safe_load((REPO / ".pre-commit-hooks.yaml").read_text())}
    assert hooks["snodo-protocol-check"]["entry"] == "snodo protocol check"
    assert hooks["snodo-verify"]["stages"] == ["pre-push"]
    assert all(h["language"] == "python" and h["pass_filenames"] is False for h in hooks.values())
    assert shutil.which("bash")  # the pre-push entry is a bash one-liner
