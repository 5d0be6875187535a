"""What the confined path remembers between starts (the protected paths found through git,
the mounts, resolved paths, pids groups) is dropped as soon as what it was made from
changes: a protected file added to the index, a new one where a pattern names its
directory, another protocol. Real confined processes, both backends."""

from __future__ import annotations

import os
import sys
import textwrap
import time
from pathlib import Path

import attrs
import pytest

from snodo.process.runner import run_process
from snodo.sandbox import SandboxPolicy, layout
from snodo.sandbox.policy import Limits
from tests.conftest import git


def _repo(root: Path, files: dict[str, str]) -> Path:
    root.mkdir()
    git(root, "init", "-q")
    for rel, text in files.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(text)
    git(root, "add", "-A")
    git(root, "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "base")
    return root


def _write(ws: Path, policy: SandboxPolicy, *targets: str) -> dict[str, str]:
    """Try to overwrite each target from a confined process: ``written`` or ``refused``."""
    code = textwrap.dedent(
        """
        import sys
        for target in sys.argv[1:]:
            try:
                open(target, "w").write("changed")
                print(target, "written")
            except OSError:
                print(target, "refused")
        """
    )
    result = run_process([sys.executable, "-c", code, *targets], cwd=ws, timeout=60, sandbox=policy)
    return dict(line.split() for line in result.output.splitlines() if line.endswith(("written", "refused")))


def test_a_protected_file_added_to_the_index_is_read_only_in_the_next_run(backend: str, tmp_path: Path) -> None:
    ws = _repo(tmp_path / "ws", {"deep/er/keep.txt": "x", "app.py": "x"})
    policy = SandboxPolicy(workspace=ws, read_only=("**/*.key",))
    time.sleep(0.05)  # what was just written has settled: the listing is remembered
    assert _write(ws, policy, "app.py") == {"app.py": "written"}
    assert (Path(os.path.realpath(ws)), ("**/*.key",)) in layout._MATCHES  # the next start reuses it
    # A new match deep below a wildcard: no directory the layout watches changes, the index does.
    (ws / "deep" / "er" / "id.key").write_text("secret")
    git(ws, "add", "deep/er/id.key")
    assert _write(ws, policy, "deep/er/id.key", "app.py") == {"deep/er/id.key": "refused", "app.py": "written"}
    assert (ws / "deep" / "er" / "id.key").read_text() == "secret"


def test_a_new_untracked_file_where_a_pattern_names_the_directory_is_read_only(backend: str, tmp_path: Path) -> None:
    ws = _repo(tmp_path / "ws", {"config/base.yml": "x", "app.py": "x"})
    policy = SandboxPolicy(workspace=ws, read_only=("config/*.yml",))
    time.sleep(0.05)
    assert _write(ws, policy, "config/base.yml") == {"config/base.yml": "refused"}
    (ws / "config" / "prod.yml").write_text("db: prod")  # never added to the index
    assert _write(ws, policy, "config/prod.yml") == {"config/prod.yml": "refused"}
    assert (ws / "config" / "prod.yml").read_text() == "db: prod"


def test_a_changed_protocol_changes_what_is_read_only(backend: str, tmp_path: Path) -> None:
    ws = _repo(tmp_path / "ws", {"a.txt": "a", "b.txt": "b"})
    first = SandboxPolicy(workspace=ws, read_only=("a.txt",))
    assert _write(ws, first, "a.txt", "b.txt") == {"a.txt": "refused", "b.txt": "written"}
    second = attrs.evolve(first, read_only=("b.txt",))
    assert _write(ws, second, "a.txt", "b.txt") == {"a.txt": "written", "b.txt": "refused"}


def test_a_deleted_protected_file_does_not_break_the_next_start(backend: str, tmp_path: Path) -> None:
    ws = _repo(tmp_path / "ws", {"secret.txt": "s", "app.py": "x"})
    policy = SandboxPolicy(workspace=ws, read_only=("secret.txt",))
    assert _write(ws, policy, "secret.txt") == {"secret.txt": "refused"}
    (ws / "secret.txt").unlink()  # the index still lists it
    assert _write(ws, policy, "app.py") == {"app.py": "written"}


def test_every_run_in_a_reused_pids_group_is_limited_and_killed(backend: str, tmp_path: Path) -> None:
    """As root each run gets a pids group; groups are reused, never shared while in use: the
    limit holds run after run and nothing a finished run left behind survives it."""
    from snodo.sandbox import cgroup

    if os.getuid() != 0 or not cgroup.available():
        pytest.skip("pids groups are made only as root with a cgroup v1 pids hierarchy")
    ws = tmp_path / "ws"
    ws.mkdir()
    policy = SandboxPolicy(workspace=ws, limits=Limits(processes=16))
    code = textwrap.dedent(
        """
        import os, subprocess, sys, time
        started = 0
        for _ in range(100):
            try:
                if os.fork() == 0:
                    time.sleep(60)
                    os._exit(0)
                started += 1
            except OSError:
                break
        print("started", started, flush=True)
        """
    )
    for _ in range(4):
        result = run_process([sys.executable, "-c", code], cwd=ws, timeout=60, sandbox=policy)
        assert 0 < int(result.output.split("started")[1].split()[0]) <= 16, result.output
    # Killed at the end of each run; a killed process may take a moment to finish exiting.
    deadline = time.monotonic() + 10
    left = ["?"]
    while left and time.monotonic() < deadline:
        left = [p for g in cgroup.PIDS.glob(f"snodo-{os.getpid()}-*") for p in (g / "cgroup.procs").read_text().split()]
        time.sleep(0.05)
    assert left == [], left
