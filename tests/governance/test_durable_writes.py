"""One durable write per validation, before the answer (issue 26).

A warm ``validate_task`` that passes and issues a token flushes exactly once: the audit
log's append (its events, the token's event and the signed checkpoint in one write and
one ``fdatasync``). The token row is committed without a flush (an unrecorded token is
refused, never accepted) and the home's checkpoint is written in place, not renamed over
(a rename costs a flush on ext4).
"""

from __future__ import annotations

import os
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from snodo.governance.service import Project, validate_task
from snodo.plugin.host import get_plugin_manager
from snodo.protocol import load_protocol
from snodo.state.audit import AuditLog
from tests.conftest import make_repo

PROTOCOL = """\
protocol_id: durable
name: durable
modes:
  - mode_id: m
    tools: [read, edit, validate, dispatch]
    validators: [shape, post]
    coder: mock
validators:
  - {validator_id: shape, validator_type: protocol}
  - {validator_id: post, validator_type: pytest, evaluation_phase: post_execute}
"""


def test_a_warm_validation_is_one_flush_and_no_rename(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    root = make_repo(tmp_path / "repo")
    (root / ".snodo").mkdir()
    (root / ".snodo" / "protocol.yml").write_text(PROTOCOL)
    plugins = get_plugin_manager()
    project = Project(load_protocol(root / ".snodo" / "protocol.yml", plugins), plugins, home=tmp_path / "home")
    validate_task(project, spec="warm up: keys, session, stores")
    calls: Counter[str] = Counter()
    for name in ("fsync", "fdatasync", "replace", "rename"):
        real = getattr(os, name)

        def counted(*args: Any, _real: Any = real, _name: str = name, **kwargs: Any) -> Any:
            calls[_name] += 1
            return _real(*args, **kwargs)

        monkeypatch.setattr(os, name, counted)
    outcome = validate_task(project, spec="add a module")
    assert outcome.status == "pass" and outcome.token is not None, outcome.payload()
    assert dict(calls) == {"fdatasync": 1}
    events = [r["event"] for r in AuditLog(root / ".snodo" / "audit.log", home=tmp_path / "home").records()]
    assert events[-2:] == ["validate", "token_issued"]
    assert AuditLog(root / ".snodo" / "audit.log", home=tmp_path / "home").verify().ok
