"""The run records which backend confined it and what that backend cannot guarantee here."""

from __future__ import annotations

import os
import sys
from pathlib import Path

from snodo.process.runner import run_process
from snodo.sandbox import SandboxPolicy, cgroup
from snodo.sandbox.choose import here, missing


def test_every_confined_start_names_its_backend_to_the_policy(backend: str, tmp_path: Path) -> None:
    seen: list[str] = []
    policy = SandboxPolicy(workspace=tmp_path, on_confined=seen.append)
    assert run_process([sys.executable, "-c", "pass"], cwd=tmp_path, timeout=30, sandbox=policy).ok
    assert seen == [backend]
    assert here() == (backend, missing(backend))


def test_the_gaps_are_said_plainly(backend: str) -> None:
    gaps = missing(backend)
    if backend == "landlock":
        assert any("host UNIX sockets" in g for g in gaps) and any("/dev/shm" in g for g in gaps)
    assert any("RLIMIT_NPROC" in g for g in gaps) == (os.getuid() == 0 and not cgroup.available())
