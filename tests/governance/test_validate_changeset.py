"""`snodo validate --phase post_execute` judges the working tree's real change set.

The shipped forbidden-imports example validator (a third-party-style package, registered
through a real ``snodo`` entry point on ``PYTHONPATH``) checks only changed files, so it
passes blind when the change set is empty: each kind of change must reach it.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from tests.conftest import REPO, git, make_repo

EXAMPLE_SRC = REPO / "examples" / "snodo-forbidden-imports" / "src"

PROTOCOL = """\
protocol_id: changes
name: Change set
initial_mode: dev
modes:
  - mode_id: dev
    name: Dev
    tools: [read, validate]
    validators: [no-pickle]
validators:
  - validator_id: no-pickle
    validator_type: forbidden-imports
    evaluation_phase: post_execute
    tooling: {forbidden: [pickle]}
"""

BAD = "import pickle\n\n\ndef load(b):\n    return pickle.loads(b)\n"


@pytest.fixture
def plugin_env(tmp_path: Path) -> dict[str, str]:
    """PYTHONPATH holding the example package and a dist-info declaring its entry point."""
    site = tmp_path / "site"
    dist = site / "snodo_forbidden_imports-0.0.0.dist-info"
    dist.mkdir(parents=True)
    (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: snodo-forbidden-imports\nVersion: 0.0.0\n")
    (dist / "entry_points.txt").write_text("[snodo]\nforbidden-imports = snodo_forbidden_imports\n")
    path = os.pathsep.join([str(site), str(EXAMPLE_SRC), os.environ.get("PYTHONPATH", "")]).rstrip(os.pathsep)
    return {"PYTHONPATH": path}


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    root = make_repo(tmp_path / "proj")
    (root / ".snodo").mkdir()
    (root / ".snodo" / "protocol.yml").write_text(PROTOCOL)
    (root / "ok.py").write_text("import json\n")
    (root / ".gitignore").write_text("ignored.py\n")
    git(root, "add", "-A")
    git(root, "commit", "-q", "-m", "base")
    return root


def post(snodo_cli, root: Path, env: dict[str, str], *extra: str):  # type: ignore[no-untyped-def]
    return snodo_cli("validate", "check imports", "--phase", "post_execute", "--json", *extra, cwd=root, env=env)


def test_no_change_passes_and_ignored_files_do_not_count(snodo_cli, repo: Path, plugin_env: dict[str, str]) -> None:  # type: ignore[no-untyped-def]
    (repo / "ignored.py").write_text(BAD)
    r = post(snodo_cli, repo, plugin_env)
    assert r.returncode == 0, r
    assert "no changed Python file" in r.json()["results"][0]["justification"]


@pytest.mark.parametrize("kind", ["untracked", "staged", "unstaged"])
def test_each_kind_of_change_reaches_the_validator(
    snodo_cli, repo: Path, plugin_env: dict[str, str], kind: str
) -> None:  # type: ignore[no-untyped-def]
    if kind == "untracked":
        (repo / "new_mod.py").write_text(BAD)
        culprit = "new_mod.py"
    elif kind == "staged":
        (repo / "staged_mod.py").write_text(BAD)
        git(repo, "add", "staged_mod.py")
        culprit = "staged_mod.py"
    else:
        (repo / "ok.py").write_text(BAD)
        culprit = "ok.py"
    r = post(snodo_cli, repo, plugin_env)
    assert r.returncode == 1, r
    payload = r.json()
    assert payload["status"] == "blocker"
    assert f"{culprit}:1 imports pickle" in payload["results"][0]["justification"]


def test_base_ref_widens_the_change_set_to_committed_work(snodo_cli, repo: Path, plugin_env: dict[str, str]) -> None:  # type: ignore[no-untyped-def]
    base = git(repo, "rev-parse", "HEAD").strip()
    (repo / "committed.py").write_text(BAD)
    git(repo, "add", "committed.py")
    git(repo, "commit", "-q", "-m", "work")
    assert post(snodo_cli, repo, plugin_env).returncode == 0  # against HEAD: nothing changed
    r = post(snodo_cli, repo, plugin_env, "--base", base)
    assert r.returncode == 1, r
    assert "committed.py:1 imports pickle" in r.json()["results"][0]["justification"]


def test_a_base_that_is_no_commit_cannot_run(snodo_cli, repo: Path, plugin_env: dict[str, str]) -> None:  # type: ignore[no-untyped-def]
    r = post(snodo_cli, repo, plugin_env, "--base", "no-such-branch")
    assert r.returncode == 4, r
    assert "no-such-branch" in r.stdout + r.stderr and "--base" in r.stdout + r.stderr


def test_working_tree_changes_shapes(tmp_path: Path) -> None:
    from snodo.workspace.changes import working_tree_changes

    root = make_repo(tmp_path / "r")
    (root / ".snodo").mkdir()
    (root / ".snodo" / "audit.log").write_text("{}\n")  # left by an older snodo: never part of the change
    (root / "README.md").write_text("# changed\n")
    (root / "sub").mkdir()
    (root / "sub" / "new.txt").write_text("one\ntwo")
    changes = working_tree_changes(root)
    assert changes.changed_files == ("README.md", "sub/new.txt")
    assert "+# changed" in changes.diff
    assert "diff --git a/sub/new.txt b/sub/new.txt\nnew file mode 100644" in changes.diff
    assert "+one\n+two\n\\ No newline at end of file" in changes.diff
    assert ".snodo" not in changes.diff

    fresh = tmp_path / "fresh"
    fresh.mkdir()
    git(fresh, "init", "-q")
    (fresh / "a.py").write_text("x = 1\n")
    assert working_tree_changes(fresh).changed_files == ("a.py",)


def test_an_untracked_environment_is_not_part_of_the_change(snodo_cli, repo: Path, plugin_env: dict[str, str]) -> None:  # type: ignore[no-untyped-def]
    """A project's own `.venv`, not ignored, held thousands of "changed" files."""
    venv = repo / ".venv"
    (venv / "lib" / "site-packages").mkdir(parents=True)
    (venv / "pyvenv.cfg").write_text("home = /usr/bin\n")
    for i in range(30):
        (venv / "lib" / "site-packages" / f"mod_{i}.py").write_text(BAD)
    r = post(snodo_cli, repo, plugin_env)
    assert r.returncode == 0, r
    assert "no changed Python file" in r.json()["results"][0]["justification"]
