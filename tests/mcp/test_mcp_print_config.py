"""``snodo serve --print-config HOST``: the printed snippet starts a server that works, from a
directory that is not the project (the host's working directory must not matter)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from anyio.from_thread import start_blocking_portal
from mcp.client.session import ClientSession
from mcp.client.stdio import StdioServerParameters, stdio_client
from mcp_harness import SERVE_TIMEOUT, git, make_project, server_env, snodo


def test_each_host_gets_an_absolute_command_and_the_project_protocol(module_dir: Path, module_home: Path) -> None:
    root = make_project(module_dir / "hosts", template="solo", home=module_home)
    protocol = str(root / ".snodo" / "protocol.yml")
    for host, key in (("claude-code", "mcpServers"), ("claude-desktop", "mcpServers"), ("cursor", "mcpServers")):
        r = snodo(root, module_home, "serve", "--print-config", host, "--mode", "producer")
        assert r.returncode == 0, r.stderr
        entry = json.loads(r.stdout)[key]["snodo"]
        assert Path(entry["command"]).is_absolute() and os.access(entry["command"], os.X_OK)
        assert entry["args"][-5:] == ["serve", "--protocol", protocol, "--mode", "producer"]
        assert entry["env"] == {"SNODO_HOME": str(module_home)}
        assert "docs/mcp-hosts.md" in r.stderr
    vscode = json.loads(snodo(root, module_home, "serve", "--print-config", "vscode").stdout)
    assert vscode["servers"]["snodo"]["type"] == "stdio" and "--mode" not in vscode["servers"]["snodo"]["args"]
    bad = snodo(root, module_home, "serve", "--print-config", "emacs")
    assert bad.returncode == 4 and "emacs" in bad.stderr and "Traceback" not in bad.stderr
    unknown_mode = snodo(root, module_home, "serve", "--print-config", "cursor", "--mode", "nope")
    assert unknown_mode.returncode != 0 and unknown_mode.stdout == "" and "producer" in unknown_mode.stderr


@pytest.mark.slow
def test_the_generic_snippet_serves_the_project_from_another_directory(
    module_dir: Path, module_home: Path, tmp_path: Path
) -> None:
    root = make_project(module_dir / "generic", template="solo", home=module_home)
    r = snodo(root, module_home, "serve", "--print-config", "generic", "--mode", "producer")
    assert r.returncode == 0, r.stderr
    cfg = json.loads(r.stdout)
    assert cfg["cwd"] == str(root)
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    params = StdioServerParameters(
        command=cfg["command"],
        args=cfg["args"],
        cwd=str(elsewhere),
        env={**server_env(module_home), **cfg.get("env", {}), "PATH": os.environ.get("PATH", "")},
    )
    with (
        open(tmp_path / "serve.stderr", "w") as err,
        start_blocking_portal() as portal,
        portal.wrap_async_context_manager(stdio_client(params, errlog=err)) as (read, write),
    ):
        session = ClientSession(read, write, read_timeout_seconds=SERVE_TIMEOUT)
        with portal.wrap_async_context_manager(session):
            portal.call(session.initialize)
            tools = {t.name for t in portal.call(session.list_tools).tools}
            assert {"validate_task", "write_file"} <= tools
            listed = portal.call(session.call_tool, "list_files", {})
            assert not listed.is_error
            assert "README.md" in json.dumps([c.model_dump() for c in listed.content])


def test_opencode_and_codex_configs_close_the_hosts_own_doors(module_dir: Path, module_home: Path) -> None:
    import tomllib

    root = make_project(module_dir / "doors", template="solo", home=module_home)
    protocol = str(root / ".snodo" / "protocol.yml")
    r = snodo(root, module_home, "serve", "--print-config", "opencode")
    assert r.returncode == 0, r.stderr
    opencode = json.loads(r.stdout)
    entry = opencode["mcp"]["snodo"]
    assert entry["type"] == "local" and Path(entry["command"][0]).is_absolute()
    assert entry["command"][1:] == ["serve", "--protocol", protocol]
    assert entry["environment"] == {"SNODO_HOME": str(module_home)}
    assert entry["timeout"] >= 360_000  # run_tests may take 300 s; opencode's own default is far shorter
    assert {k for k, on in opencode["tools"].items() if not on} >= {"write", "edit", "patch", "bash"}
    assert opencode["permission"]["edit"] == "deny" and opencode["permission"]["bash"] == "deny"
    assert "still open" in r.stderr

    r = snodo(root, module_home, "serve", "--print-config", "codex", "--mode", "producer")
    assert r.returncode == 0, r.stderr
    codex = tomllib.loads(r.stdout)
    assert codex["sandbox_mode"] == "read-only" and codex["approval_policy"] == "never"
    server = codex["mcp_servers"]["snodo"]
    assert Path(server["command"]).is_absolute()
    assert server["args"] == ["serve", "--protocol", protocol, "--mode", "producer"]
    assert server["env"] == {"SNODO_HOME": str(module_home)}
    assert server["tool_timeout_sec"] >= 360 and server["default_tools_approval_mode"] == "approve"
    assert server["required"] is True  # Codex waits for snodo, and stops with its start-up error
    assert "# Still open:" in r.stdout


def test_the_claude_code_config_closes_its_doors_and_waits_for_snodo(module_dir: Path, module_home: Path) -> None:
    """One file for ``claude --mcp-config F --strict-mcp-config --settings F``: the server,
    Claude Code's own writers and shell denied, and the first turn held until snodo is
    connected (Claude Code 2.1 starts ``claude -p`` at once otherwise: tests/mcp/test_real_hosts.py)."""
    root = make_project(module_dir / "claude", template="solo", home=module_home)
    r = snodo(root, module_home, "serve", "--print-config", "claude-code", "--mode", "producer")
    assert r.returncode == 0, r.stderr
    config = json.loads(r.stdout)
    assert config["permissions"] == {"deny": ["Write", "Edit", "NotebookEdit", "Bash"], "allow": ["mcp__snodo"]}
    assert config["env"]["MCP_CONNECTION_NONBLOCKING"] == "false"
    assert int(config["env"]["MCP_TOOL_TIMEOUT"]) >= 360_000  # run_tests may take 300 s
    assert "--strict-mcp-config" in r.stderr and "--settings" in r.stderr


def _doctor(root: Path, home: Path, user: Path, *args: str) -> dict[str, Any]:
    """``snodo doctor --host … --json`` with ``user`` as the home directory (~/.claude lives there)."""
    env = {**os.environ, **server_env(home), "HOME": str(user)}
    r = subprocess.run(
        [sys.executable, "-m", "snodo", "doctor", "--host", *args, "--json"],
        cwd=root,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    report: dict[str, Any] = json.loads(r.stdout)
    assert r.returncode == (0 if report["connected"] else 1), r.stdout + r.stderr
    return report


def test_doctor_host_runs_the_checks_serve_runs(module_dir: Path, module_home: Path, tmp_path: Path) -> None:
    """An uncommitted protocol is a note (served from the working tree), a drifted one is
    refused by serve, so doctor says NOT connected — whatever the host config says."""
    root = make_project(module_dir / "serve-checks", template="solo", home=module_home)
    user = tmp_path / "user"
    user.mkdir()
    (root / ".claude").mkdir()
    printed = snodo(root, module_home, "serve", "--print-config", "claude-code", check=True).stdout
    (root / ".claude" / "snodo.json").write_text(printed)
    report = _doctor(root, module_home, user, "claude-code")
    assert report["connected"] and report["open_writers"] == [], report
    assert [p for p in report["problems"] if "never committed" in p], report
    git(root, "add", ".snodo/protocol.yml")
    git(root, "commit", "-qm", "protocol")
    report = _doctor(root, module_home, user, "claude-code")
    assert report["connected"] and not [p for p in report["problems"] if "committed" in p], report
    protocol = root / ".snodo" / "protocol.yml"
    protocol.write_text(protocol.read_text() + "# a host's own edit\n")
    report = _doctor(root, module_home, user, "claude-code")
    assert not report["connected"], report
    assert any("serve would refuse to start" in p and "not the one in force" in p for p in report["problems"]), report
    git(root, "checkout", "--", ".snodo/protocol.yml")


def test_doctor_host_claude_code_reads_every_settings_file(module_dir: Path, module_home: Path, tmp_path: Path) -> None:
    root = make_project(module_dir / "claude-settings", template="solo", home=module_home)
    git(root, "add", ".snodo/protocol.yml")
    git(root, "commit", "-qm", "protocol")
    user = tmp_path / "user"
    (user / ".claude").mkdir(parents=True)
    printed = json.loads(snodo(root, module_home, "serve", "--print-config", "claude-code", check=True).stdout)
    (root / ".mcp.json").write_text(json.dumps({"mcpServers": printed["mcpServers"]}))  # the server only
    report = _doctor(root, module_home, user, "claude-code")
    assert report["open_writers"] == ["Write", "Edit", "NotebookEdit", "Bash"], report
    assert any("MCP_CONNECTION_NONBLOCKING" in p for p in report["problems"]), report
    assert any("MCP_TOOL_TIMEOUT" in p or "call timeout" in p for p in report["problems"]), report
    (root / ".claude").mkdir()
    (root / ".claude" / "settings.json").write_text(json.dumps({"permissions": {"deny": ["Write", "Edit"]}}))
    (root / ".claude" / "settings.local.json").write_text(json.dumps({"permissions": {"deny": ["Bash"]}}))
    (user / ".claude" / "settings.json").write_text(
        json.dumps({"permissions": {"deny": ["NotebookEdit"]}, "env": printed["env"]})
    )
    report = _doctor(root, module_home, user, "claude-code")
    assert report["connected"] and report["open_writers"] == [], report
    assert not [p for p in report["problems"] if not p.startswith("note: ")], report


def test_doctor_host_reads_the_printed_configs_and_names_open_writers(
    module_dir: Path, module_home: Path, tmp_path: Path
) -> None:
    root = make_project(module_dir / "doctor", template="solo", home=module_home)
    git(root, "add", ".snodo/protocol.yml")
    git(root, "commit", "-qm", "protocol")
    for host, name in (("opencode", "opencode.json"), ("codex", "snodo.config.toml")):
        printed = snodo(root, module_home, "serve", "--print-config", host)
        (tmp_path / name).write_text(printed.stdout)
        r = snodo(root, module_home, "doctor", "--host", host, str(tmp_path / name), "--json")
        assert r.returncode == 0, r.stdout + r.stderr
        report = json.loads(r.stdout)
        assert report["connected"] and report["open_writers"] == [], report
        assert not [p for p in report["problems"] if not p.startswith("note: ")], report
    opened = json.loads((tmp_path / "opencode.json").read_text())
    del opened["tools"], opened["permission"]
    opened["mcp"]["snodo"]["timeout"] = 60_000
    (tmp_path / "opencode.json").write_text(json.dumps(opened))
    report = json.loads(
        snodo(root, module_home, "doctor", "--host", "opencode", str(tmp_path / "opencode.json"), "--json").stdout
    )
    assert report["open_writers"] == ["write", "edit", "patch", "bash"]
    assert any("timeout is 60.0 s" in p for p in report["problems"]), report
    profile = tmp_path / "snodo.config.toml"
    profile.write_text(profile.read_text().replace("required = true", "required = false"))
    report = json.loads(snodo(root, module_home, "doctor", "--host", "codex", str(profile), "--json").stdout)
    assert report["connected"] and any("set required = true" in p for p in report["problems"]), report
    opened["mcp"]["snodo"]["command"] += ["--mode", "nosuch"]  # served, a host shows only `unavailable`
    (tmp_path / "opencode.json").write_text(json.dumps(opened))
    report = json.loads(
        snodo(root, module_home, "doctor", "--host", "opencode", str(tmp_path / "opencode.json"), "--json").stdout
    )
    assert not report["connected"] and any("--mode 'nosuch' is not a mode" in p for p in report["problems"]), report
    missing = snodo(root, module_home, "doctor", "--host", "cursor", str(tmp_path / "nothing.json"))
    assert missing.returncode == 1 and "NOT connected" in missing.stdout
