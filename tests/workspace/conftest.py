"""A throwaway project for the tool surface: a real git repository with governance state,
protected files and symlinks that lead into ``.snodo/``, ``.git/`` and out of the root."""

from __future__ import annotations

import hashlib
import os
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from snodo.workspace import Git, PathGuard, Workspace

PROTECTED = ("secrets", "*.lock", "config/**/prod.yml")

FILES = {
    ".snodo/protocol.yml": "protocol_id: p\n",
    ".snodo/state.json": "{}\n",
    ".snodo/jobs/j1/spec.md": "spec\n",
    "src/app.py": "print('app')\n",
    "secrets/key.pem": "KEY\n",
    "poetry.lock": "lock\n",
    "deep/readme.md": "deep\n",
}
SYMLINKS = {
    "link_to_snodo": ".snodo",
    "link_into_snodo": ".snodo/protocol.yml",
    "dangling_into_snodo": ".snodo/new.yml",
    "deep/up": "../.snodo",
    "link_to_git": ".git",
    "link_out": "../outside",
    "alias_secrets": "secrets",
    "src_link": "src",
    "loop": "loop",
}


def git(root: Path, *args: str) -> str:
    """Run git directly, as a human or the engine would, bypassing the tool surface."""
    return subprocess.run(
        ["git", "-C", str(root), "-c", "user.name=human", "-c", "user.email=human@example.com", *args],
        check=True,
        capture_output=True,
        text=True,
        env={**os.environ, "GIT_CONFIG_NOSYSTEM": "1", "GIT_CONFIG_GLOBAL": os.devnull},
    ).stdout


def build_project(base: Path) -> Path:
    outside = base / "outside"
    outside.mkdir()
    (outside / "file.txt").write_text("outside\n")
    root = base / "project"
    root.mkdir()
    for rel, text in FILES.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(text)
    for rel, target in SYMLINKS.items():
        os.symlink(target, root / rel)
    git(root, "init", "-q", "-b", "main")
    git(root, "add", "-A")
    git(root, "commit", "-q", "-m", "initial")
    return root


def snapshot(base: Path) -> dict[str, str]:
    """Every entry under ``base`` (``.snodo/`` and ``.git/`` included) with its content hash,
    link target or directory marker: equal snapshots mean an untouched tree."""
    seen: dict[str, str] = {}
    for directory, dirnames, filenames in os.walk(base):
        for name in dirnames + filenames:
            path = Path(directory) / name
            rel = path.relative_to(base).as_posix()
            if path.is_symlink():
                seen[rel] = "link:" + os.readlink(path)
            elif path.is_dir():
                seen[rel] = "dir"
            else:
                seen[rel] = hashlib.sha256(path.read_bytes()).hexdigest()
    return seen


@pytest.fixture(autouse=True)
def _hermetic_git(monkeypatch: pytest.MonkeyPatch, tmp_path_factory: pytest.TempPathFactory) -> None:
    """No user or system git configuration: identities and hooks come from the test alone."""
    monkeypatch.setenv("HOME", str(tmp_path_factory.getbasetemp()))
    monkeypatch.setenv("GIT_CONFIG_NOSYSTEM", "1")
    monkeypatch.setenv("GIT_CONFIG_GLOBAL", os.devnull)


@pytest.fixture
def project(tmp_path: Path) -> Path:
    return build_project(tmp_path)


@pytest.fixture(scope="module")
def shared_project(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """One project for tests that must leave it untouched (each checks that it did)."""
    yield build_project(tmp_path_factory.mktemp("shared"))


@pytest.fixture
def guard(project: Path) -> PathGuard:
    return PathGuard(project, PROTECTED)


@pytest.fixture
def workspace(project: Path, guard: PathGuard) -> Workspace:
    return Workspace(project, guard)


@pytest.fixture
def repo(project: Path, guard: PathGuard) -> Git:
    return Git(project, guard)
