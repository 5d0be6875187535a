"""What ``snodo serve --print-config HOST`` prints: a server entry that works as printed, and
settings that close the host's own editor and shell (they would write the project past
snodo's guard and audit) where the host allows it; :data:`OPEN_DOORS` names what stays open.
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

from snodo.mcp.catalog import TEST_TIMEOUT
from snodo.protocol.models import Protocol

#: Added to the longest limit so the host never gives up just before snodo answers.
MARGIN = 60.0

#: host -> (where the output goes, the key holding the servers; "" when the output is the entry)
HOSTS: dict[str, tuple[str, str]] = {
    "opencode": ("opencode.json at the project root (or ~/.config/opencode/opencode.json)", "mcp"),
    "codex": ("~/.codex/snodo.config.toml (a profile), then run `codex --profile snodo`", "mcp_servers"),
    "claude-code": (
        "a file such as .claude/snodo.json, then run `claude --mcp-config .claude/snodo.json --strict-mcp-config "
        "--settings .claude/snodo.json` (the one file is both the server list and the settings)",
        "mcpServers",
    ),
    "claude-desktop": ("claude_desktop_config.json (Settings → Developer → Edit Config)", "mcpServers"),
    "cursor": (".cursor/mcp.json in the project (or ~/.cursor/mcp.json for every project)", "mcpServers"),
    "vscode": (".vscode/mcp.json in the workspace", "servers"),
    "generic": ("your MCP host's stdio server settings: command, args, working directory, environment", ""),
}

#: What the printed config cannot close, per host (also in docs/mcp-hosts.md).
OPEN_DOORS: dict[str, str] = {
    "opencode": "opencode's read-only tools (read, grep, glob, list) stay on; a `--agent` or agent config that "
    "turns write/edit/bash back on reopens them",
    "codex": "Codex's shell still runs (read-only: it can read the project and run read-only commands); "
    "`--sandbox`, `--approve-for-me` (or `--full-auto` in older versions), `-c sandbox_mode=…` or "
    "`--dangerously-bypass-approvals-and-sandbox` on the command line reopen it",
    "claude-code": "Claude Code's read-only tools (Read, Grep, Glob) and its web tools stay on; its Write, Edit, "
    "NotebookEdit and Bash are denied only where this file is loaded as settings (--settings, or its "
    "permissions copied into .claude/settings.json); a managed policy or a settings file that drops the deny "
    "rules reopens them",
    "claude-desktop": "Claude Desktop's other MCP servers and extensions (a filesystem server) are outside snodo",
    "cursor": "Cursor's own editor, agent edits and terminal stay on; its MCP config cannot turn them off",
    "vscode": "VS Code's agent mode keeps its built-in edit and terminal tools; deselect them in the chat's "
    "tool picker",
    "generic": "whatever tools your host has besides snodo's stay as they are",
}


def call_timeout(protocol: Protocol) -> int:
    """Seconds a host should wait for one call: the longest validator or test limit, plus a margin."""
    limits = [TEST_TIMEOUT, *(v.timeout for v in protocol.validators)]
    return math.ceil(max(limits) + MARGIN)


def server_entry(host: str, command: list[str], env: dict[str, str], root: Path, timeout: int) -> dict[str, Any]:
    """The stdio server entry in ``host``'s own spelling."""
    program, *args = command
    if host == "opencode":  # one command array; its env key is `environment`; timeout in ms
        entry: dict[str, Any] = {"type": "local", "command": command, "enabled": True, "timeout": timeout * 1000}
        if env:
            entry["environment"] = env
        return entry
    entry = {"command": program, "args": args}
    if host in ("vscode", "claude-code"):
        entry = {"type": "stdio", **entry}
    if host == "generic":
        entry["cwd"] = str(root)  # any directory works: --protocol pins the project
    if env:
        entry["env"] = env
    return entry


#: Claude Code's own tools that write the project or run commands (its deny rules name them).
CLAUDE_CODE_WRITERS = ("Write", "Edit", "NotebookEdit", "Bash")


def claude_code_config(entry: dict[str, Any], timeout: int) -> dict[str, Any]:
    """One file that is both Claude Code's server list (``--mcp-config``) and its settings
    (``--settings``): snodo's tools allowed, its own writers and shell denied, and the first
    turn held until snodo is connected (headless ``claude -p`` starts it at once otherwise)."""
    return {
        "mcpServers": {"snodo": entry},
        "permissions": {"deny": list(CLAUDE_CODE_WRITERS), "allow": ["mcp__snodo"]},
        "env": {
            "MCP_CONNECTION_NONBLOCKING": "false",
            "MCP_TIMEOUT": "60000",
            "MCP_TOOL_TIMEOUT": str(timeout * 1000),
        },
    }


def opencode_config(entry: dict[str, Any]) -> dict[str, Any]:
    """opencode.json: snodo's server, its tools allowed, opencode's own writers and shell off."""
    return {
        "$schema": "https://opencode.ai/config.json",
        "mcp": {"snodo": entry},
        "tools": {"write": False, "edit": False, "patch": False, "bash": False, "webfetch": False},
        "permission": {"edit": "deny", "bash": "deny", "webfetch": "deny", "snodo_*": "allow"},
    }


def codex_config(entry: dict[str, Any], timeout: int, root: Path) -> str:
    """A Codex profile (TOML): its sandbox read-only, no escalation prompt, snodo's tools approved."""
    lines = [
        f"# snodo governs {root}: save as ~/.codex/snodo.config.toml, run `codex --profile snodo`.",
        "# Codex's own shell and patch tool run read-only, and a refused command is not escalated:",
        "# every change to the project goes through snodo's tools (path guard, validators, audit).",
        f"# Still open: {OPEN_DOORS['codex']}.",
        'sandbox_mode = "read-only"',
        'approval_policy = "never"',
        "",
        "[mcp_servers.snodo]",
        f"command = {json.dumps(entry['command'])}",
        f"args = {json.dumps(entry['args'])}",
    ]
    if entry.get("env"):
        lines.append("env = { " + ", ".join(f"{k} = {json.dumps(v)}" for k, v in entry["env"].items()) + " }")
    lines += [
        "# Required: Codex waits for snodo before the first turn (else the first turn runs without",
        "# snodo's tools) and stops with snodo's own message when snodo cannot start.",
        "required = true",
        "startup_timeout_sec = 60",
        f"tool_timeout_sec = {timeout}  # longer than run_tests and the protocol's validator limits",
        "# Codex refuses unapproved write_file, delete_file and dispatch_task before snodo sees them",
        "# (and nothing is audited): snodo decides, so its tools are pre-approved.",
        'default_tools_approval_mode = "approve"',
    ]
    return "\n".join(lines) + "\n"
