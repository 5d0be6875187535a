"""The author harness: run the real ``snodo run`` / ``snodo validate`` on a sample project
with your plugin, and assert the outcome and the audit events (pytester-style).

Load it with ``pytest_plugins = ["snodo_conformance.harness"]`` in your ``conftest.py`` (or
``-p snodo_conformance.harness``); it adds one fixture, ``snodo_project``::

    def test_my_coder_end_to_end(snodo_project):
        project = snodo_project(coder="my-coder", files={"README.md": "# demo\\n"})
        result = project.run("add a hello module")
        assert result.outcome == "completed", result.output
        assert "coder_usage" in result.events()

The commands run as the user runs them: a child process (``python -m snodo``) in a
committed git repository made by ``snodo init``, with its own ``$SNODO_HOME``. Nothing here
imports or mocks snodo's internals.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

import pytest
from attrs import frozen

from ._support import git

#: The mode the sample project works in (the one ``snodo init`` records as current).
MODE = "producer"
COMMAND_TIMEOUT = 300.0
SAMPLE_TEST = "def test_sample() -> None:\n    assert True\n"


@frozen
class SnodoResult:
    """One finished ``snodo`` command: exit code, output, its ``--json`` payload (if any)."""

    args: tuple[str, ...]
    ret: int
    stdout: str
    stderr: str
    audit_log: Path

    @property
    def output(self) -> str:
        """Both streams, for assertion messages."""
        return f"$ snodo {' '.join(self.args)}  (exit {self.ret})\n{self.stdout}{self.stderr}"

    @property
    def data(self) -> dict[str, Any]:
        """The ``--json`` payload; fails the test, showing the output, when there is none."""
        try:
            value = json.loads(self.stdout)
        except ValueError:
            pytest.fail(f"snodo printed no JSON:\n{self.output}", pytrace=False)
        if not isinstance(value, dict):
            pytest.fail(f"snodo printed JSON that is not an object:\n{self.output}", pytrace=False)
        return value

    @property
    def outcome(self) -> str:
        """``completed`` or the halt's outcome (``blocker``, ``escalate``, ...) for ``run``;
        the phase's outcome (``pass``, ``blocker``, ...) for ``validate``."""
        data = self.data
        if data.get("status") == "completed":
            return "completed"
        return str(data.get("outcome") or data.get("status") or "?")

    def audit(self) -> list[dict[str, Any]]:
        """Every audit event of the project so far, oldest first (the signed ``checkpoint``
        lines that seal each append are left out: they are evidence, not events)."""
        if not self.audit_log.exists():
            return []
        lines = self.audit_log.read_text(encoding="utf-8").splitlines()
        records = (json.loads(line) for line in lines if line.strip())
        return [r for r in records if r.get("event") != "checkpoint"]

    def events(self) -> list[str]:
        """The names of the audit events, oldest first."""
        return [str(e.get("event")) for e in self.audit()]


class SnodoProject:
    """A committed sample project governed by a one-mode protocol that uses your plugin."""

    def __init__(self, root: Path, home: Path) -> None:
        self.root = root
        self.home = home

    def write(self, files: Mapping[str, str], *, commit: bool = True) -> None:
        for rel, content in files.items():
            target = self.root / rel
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_text(content, encoding="utf-8")
        if commit:
            git(self.root, "add", "-A")
            git(self.root, "commit", "-q", "--allow-empty", "-m", "sample project change")

    def snodo(self, *args: str, timeout: float = COMMAND_TIMEOUT) -> SnodoResult:
        """Run ``snodo ARGS`` in the project, as a child process."""
        env = {**os.environ, "SNODO_HOME": str(self.home), "LITELLM_LOCAL_MODEL_COST_MAP": "True"}
        env.pop("SNODO_VERBOSE", None)
        proc = subprocess.run(
            [sys.executable, "-I", "-m", "snodo", *args],  # -I: the project is not on sys.path
            cwd=self.root,
            env=env,
            capture_output=True,
            text=True,
            timeout=timeout,
            check=False,
        )
        return SnodoResult(tuple(args), proc.returncode, proc.stdout, proc.stderr, self.audit_log)

    @property
    def audit_log(self) -> Path:
        """The project's audit log: runtime state, in the repository's git directory."""
        common = git(self.root, "rev-parse", "--path-format=absolute", "--git-common-dir").strip()
        return Path(common) / "snodo" / "audit.log"

    def run(self, spec: str, *args: str) -> SnodoResult:
        """``snodo run SPEC --json`` (the governed loop with the mode's coder)."""
        return self.snodo("run", spec, "--json", *args)

    def validate(self, spec: str, *args: str, phase: str = "pre_execute") -> SnodoResult:
        """``snodo validate SPEC --phase PHASE --json`` (one phase of the mode's validators)."""
        return self.snodo("validate", spec, "--phase", phase, "--json", *args)


def protocol_document(
    *,
    coder: str,
    coder_config: Mapping[str, Any],
    validators: Sequence[Mapping[str, Any]],
) -> dict[str, Any]:
    """The sample project's protocol: one mode, the given coder and validators, plus a
    ``protocol`` scope check (pre-execute) and the project's tests (``pytest``,
    post-execute), so each phase always has a judge."""
    entries = [
        {"validator_id": "scope", "validator_type": "protocol", "evaluation_phase": "pre_execute"},
        {"validator_id": "tests", "validator_type": "pytest", "evaluation_phase": "post_execute"},
        *[dict(v) for v in validators],
    ]
    mode: dict[str, Any] = {
        "mode_id": MODE,
        "name": "Producer",
        "tools": ["read", "edit", "test", "validate", "dispatch", "commit"],
        "validators": [str(v["validator_id"]) for v in entries],
        "coder": coder,
    }
    if coder_config:
        mode["coder_config"] = dict(coder_config)
    return {
        "protocol_id": "plugin-harness",
        "name": "Sample project of the snodo author harness",
        "version": "1.0.0",
        "initial_mode": MODE,
        "modes": [mode],
        "validators": entries,
    }


MakeProject = Callable[..., SnodoProject]


@pytest.fixture
def snodo_project(tmp_path: Path) -> MakeProject:
    """``snodo_project(coder="mock", coder_config={}, validator=None, tooling={}, phase=
    "post_execute", validators=(), files={})`` makes a sample project and returns it.

    ``validator`` names your validator type; it joins the mode (id ``under-test``) with
    ``tooling`` in ``phase``. ``validators`` adds raw protocol entries. ``files`` are
    committed with the project, beside ``README.md`` and a passing ``tests/test_sample.py``
    (the built-in ``pytest`` validator judges every run after the coder).
    """
    count = 0

    def make(
        *,
        coder: str = "mock",
        coder_config: Mapping[str, Any] | None = None,
        validator: str | None = None,
        tooling: Mapping[str, Any] | None = None,
        phase: str = "post_execute",
        validators: Sequence[Mapping[str, Any]] = (),
        files: Mapping[str, str] | None = None,
    ) -> SnodoProject:
        nonlocal count
        count += 1
        root = tmp_path / f"sample-{count}"
        root.mkdir()
        project = SnodoProject(root, tmp_path / f"snodo-home-{count}")
        git(root, "init", "-q")
        init = project.snodo("init", "--template", "solo")
        if init.ret != 0:
            pytest.fail(f"snodo init failed in the sample project:\n{init.output}", pytrace=False)
        entries = list(validators)
        if validator is not None:
            entries.append(
                {
                    "validator_id": "under-test",
                    "validator_type": validator,
                    "evaluation_phase": phase,
                    "tooling": dict(tooling or {}),
                }
            )
        doc = protocol_document(coder=coder, coder_config=coder_config or {}, validators=entries)
        project.write(
            {
                ".snodo/protocol.yml": json.dumps(doc, indent=2) + "\n",
                "README.md": "# sample\n",
                "tests/test_sample.py": SAMPLE_TEST,
                **(files or {}),
            }
        )
        return project

    return make


__all__ = ["MakeProject", "SnodoProject", "SnodoResult", "protocol_document", "snodo_project"]
