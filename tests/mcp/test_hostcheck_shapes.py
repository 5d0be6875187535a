"""``snodo doctor --host`` reads files a person edits: any JSON or TOML shape gets a report
(not connected, and why), never a traceback."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from snodo.mcp.hostcheck import check_host

SHAPES = {
    "claude-code": [[], {"mcpServers": []}, {"mcpServers": {"snodo": "snodo serve"}}],
    "opencode": [
        "text",
        {"mcp": {"snodo": {"command": "snodo serve"}}, "tools": ["write"], "permission": "deny"},
        {"mcp": {"snodo": {"type": "local"}}},
        {"mcp": []},
    ],
}


@pytest.mark.parametrize(
    ("host", "data"), [(host, data) for host, shapes in SHAPES.items() for data in shapes], ids=repr
)
def test_any_shape_of_a_host_config_gets_a_report(
    host: str, data: object, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    user = tmp_path / "user"
    user.mkdir()
    monkeypatch.setenv("HOME", str(user))
    monkeypatch.chdir(tmp_path)
    (user / ".claude.json").write_text(json.dumps({"projects": [], "mcpServers": ["snodo"]}))
    config = tmp_path / "host.json"
    config.write_text(json.dumps(data))
    report = check_host(host, config)
    assert not report.connected
    assert report.problems, report
