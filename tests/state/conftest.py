"""Fixtures for the state layer: a private ``$SNODO_HOME``, a project, and real worker processes."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from snodo.state.home import snodo_home
from snodo.state.sessions import PendingDecision

REPO = Path(__file__).resolve().parents[2]
WORKER = Path(__file__).with_name("_worker.py")


@pytest.fixture
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("SNODO_HOME", str(tmp_path / "home"))
    return snodo_home()


@pytest.fixture
def project(tmp_path: Path) -> Path:
    """A git repository with a ``.snodo/``; its runtime state is kept in ``.git/snodo/``."""
    root = tmp_path / "project"
    (root / ".snodo").mkdir(parents=True)
    subprocess.run(["git", "init", "-q", str(root)], check=True)
    (root / ".git" / "snodo").mkdir()
    return root


@pytest.fixture
def spawn(home: Path) -> Iterator[Callable[..., subprocess.Popen[str]]]:
    """Start ``_worker.py COMMAND ARGS...`` in a fresh interpreter; reaped at teardown."""
    env = {**os.environ, "SNODO_HOME": str(home)}
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(REPO), env.get("PYTHONPATH")]))
    started: list[subprocess.Popen[str]] = []

    def start(*args: object, stdin: Any = None) -> subprocess.Popen[str]:
        proc = subprocess.Popen(
            [sys.executable, str(WORKER), *map(str, args)],
            env=env,
            stdin=stdin,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        started.append(proc)
        return proc

    yield start
    for proc in started:
        if proc.poll() is None:
            proc.kill()
        proc.communicate()


def result(validator_id: str, severity: str, error: str | None = None) -> dict[str, Any]:
    return {
        "validator_id": validator_id,
        "validator_type": "pytest",
        "severity": severity,
        "justification": f"{validator_id} said {severity}",
        "error": error,
    }


@pytest.fixture
def make_pending() -> Callable[..., PendingDecision]:
    """A pending decision whose results have the given ``{validator_id: severity}``."""

    def make(
        decision_id: str = "dec-1",
        *,
        task_id: str = "task-1",
        spec_sha256: str = "a" * 64,
        severities: dict[str, str] | None = None,
        error: str | None = None,
    ) -> PendingDecision:
        severities = severities if severities is not None else {"lint": "pass", "review": "warn"}
        results = tuple(result(v, s, error if s == "error" else None) for v, s in severities.items())
        counts = {s: sum(1 for x in severities.values() if x == s) for s in ("pass", "warn", "blocker")}
        return PendingDecision(
            decision_id=decision_id,
            task_id=task_id,
            spec_sha256=spec_sha256,
            mode="dev",
            phase="pre_execute",
            results=results,
            policy={
                "name": "unanimous",
                "pass_count": counts["pass"],
                "warn_count": counts["warn"],
                "blocker_count": counts["blocker"],
                "total": len(results),
            },
            created_at="2025-01-01T00:00:00+00:00",
            spec_text="Add a greeting.",
        )

    return make
