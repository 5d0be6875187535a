"""``snodo doctor --host HOST [CONFIG]``: read a host's config and say whether snodo is
connected as configured and which of the host's own tools still write to the project.

Nothing of the host is started. The entry named ``snodo`` must start an absolute,
executable ``snodo serve`` pinned to a protocol, and the checks ``serve`` itself makes at
start-up are made here too (:func:`serve_problems`): the protocol in force (committed,
signed where ``allowed_signers`` requires it, the working tree not drifted from it), the
protocol loading with this machine's plugins, the mode, a sandbox backend for confined
runs, and the home's keys. The call timeout must cover the protocol's limits
(:func:`snodo.mcp.hostconfig.call_timeout`). The host's own writers are read from every file
the host reads them from — for Claude Code its user, project and local settings as well as
the given file (which ``--settings`` may load).
"""

from __future__ import annotations

import contextlib
import json
import os
import tomllib
from pathlib import Path
from typing import Any

from attrs import frozen

from snodo.base.errors import SnodoError
from snodo.mcp.hostconfig import CLAUDE_CODE_WRITERS, HOSTS, OPEN_DOORS, call_timeout
from snodo.protocol.models import Protocol

#: Where each host's config is looked for when none is given (relative to the working directory).
DEFAULT_PATHS: dict[str, str] = {
    "opencode": "opencode.json",
    "codex": str(Path(os.environ.get("CODEX_HOME", "~/.codex")) / "snodo.config.toml"),
    "claude-code": ".claude/snodo.json",  # as printed; else .mcp.json
    "claude-desktop": "~/.config/Claude/claude_desktop_config.json",
    "cursor": ".cursor/mcp.json",
    "vscode": ".vscode/mcp.json",
    "generic": "snodo-mcp.json",
}
_OPENCODE_WRITERS = ("write", "edit", "patch", "bash")


@frozen(kw_only=True)
class HostReport:
    host: str
    config: str
    connected: bool
    problems: tuple[str, ...]
    open_writers: tuple[str, ...]

    def as_json(self) -> dict[str, Any]:
        return {
            "host": self.host,
            "config": self.config,
            "connected": self.connected,
            "problems": list(self.problems),
            "open_writers": list(self.open_writers),
        }


def check_host(host: str, config: Path | None) -> HostReport:
    path = (config or Path(DEFAULT_PATHS[host])).expanduser()
    if config is None and host == "claude-code" and not path.is_file():
        path = Path(".mcp.json")
    problems: list[str] = []
    try:
        text = path.read_text(encoding="utf-8")
        data: dict[str, Any] = tomllib.loads(text) if host == "codex" else json.loads(text)
    except (OSError, ValueError) as exc:
        return HostReport(
            host=host, config=str(path), connected=False, problems=(f"cannot read {path}: {exc}",), open_writers=()
        )
    key = HOSTS[host][1]
    entry = data if not key else (data.get(key) or {}).get("snodo")
    if host == "claude-code" and not isinstance(entry, dict):  # `claude mcp add` keeps it in ~/.claude.json
        entry = _claude_user_entry(Path.cwd())
    if not isinstance(entry, dict):
        return HostReport(
            host=host,
            config=str(path),
            connected=False,
            problems=(f"no server named 'snodo' under {key!r}; `snodo serve --print-config {host}` prints one",),
            open_writers=_writers(host, data, path),
        )
    argv = list(entry["command"]) if host == "opencode" else [entry.get("command", ""), *entry.get("args", [])]
    problems += _command_problems([str(a) for a in argv])
    if entry.get("enabled") is False:
        problems.append("the snodo server is disabled (enabled = false)")
    env = entry.get("environment" if host == "opencode" else "env") or {}
    protocol = _protocol(argv, env if isinstance(env, dict) else {}, problems)
    connected = not [p for p in problems if not p.startswith(NOTE)]  # notes: connected, not governed as printed
    settings = _claude_settings(path, data) if host == "claude-code" else {}
    problems += _setting_problems(host, entry, settings, call_timeout(protocol) if protocol is not None else None)
    return HostReport(
        host=host,
        config=str(path),
        connected=connected,
        problems=tuple(problems),
        open_writers=_claude_writers(settings) if host == "claude-code" else _writers(host, data, path),
    )


def _setting_problems(host: str, entry: dict[str, Any], settings: dict[str, Any], needed: float | None) -> list[str]:
    """What the host's own settings for the snodo entry get wrong (the call timeout the
    protocol needs, the start-up order, the approvals); none of it disconnects snodo."""
    problems: list[str] = []
    if host == "claude-code":
        timeout = str((settings.get("env") or {}).get("MCP_TOOL_TIMEOUT") or "")
        got = int(timeout) / 1000 if timeout.isdigit() else None
        if str((settings.get("env") or {}).get("MCP_CONNECTION_NONBLOCKING", "")).lower() not in ("false", "0"):
            problems.append(
                "Claude Code starts its first turn before snodo is connected (`claude -p` does not wait for MCP "
                'servers): set "env": {"MCP_CONNECTION_NONBLOCKING": "false"} in its settings'
            )
    else:
        got = entry.get("timeout", 0) / 1000 if host == "opencode" else entry.get("tool_timeout_sec")
    if host in ("opencode", "codex", "claude-code") and needed and (not got or got < needed):
        problems.append(
            f"the call timeout is {got or 'the host default'} s; run_tests and the validators need {needed} s"
        )
    if host == "codex" and entry.get("default_tools_approval_mode") != "approve":
        problems.append(
            "Codex refuses unapproved write_file/delete_file/dispatch_task before snodo sees them: "
            'set default_tools_approval_mode = "approve"'
        )
    if host == "codex" and entry.get("required") is not True:
        problems.append(
            "Codex starts its first turn without snodo's tools and hides snodo's start-up error: set required = true"
        )
    return problems


def _command_problems(argv: list[str]) -> list[str]:
    problems = []
    program = Path(argv[0]) if argv and argv[0] else None
    if program is None or not program.is_absolute():
        problems.append(f"the command {argv[:1]} is not an absolute path; hosts do not start servers from your shell")
    elif not os.access(program, os.X_OK):
        problems.append(f"{program} is not an executable file")
    if "serve" not in argv:
        problems.append("the command does not run `snodo serve`")
    if "--protocol" in argv[:-1]:
        protocol = Path(argv[argv.index("--protocol") + 1])
        if not protocol.is_file():
            problems.append(f"--protocol {protocol} does not exist")
    else:
        problems.append("no --protocol: the project then depends on the host's working directory")
    return problems


#: A problem that leaves snodo connected (it starts and serves) but not as governed as printed.
NOTE = "note: "


def _protocol(argv: list[str], env: dict[str, Any], problems: list[str]) -> Protocol | None:
    """The protocol the command pins, checked as ``serve`` checks it at start-up (:func:`serve_problems`)."""
    if "--protocol" not in argv[:-1] or not Path(argv[argv.index("--protocol") + 1]).is_file():
        return None
    mode = argv[argv.index("--mode") + 1] if "--mode" in argv[:-1] else None
    home = Path(str(env.get("SNODO_HOME") or os.environ.get("SNODO_HOME") or "~/.snodo")).expanduser()
    protocol, found = serve_problems(Path(argv[argv.index("--protocol") + 1]), mode, home)
    problems += found
    return protocol


def serve_problems(path: Path, mode: str | None, home: Path) -> tuple[Protocol | None, list[str]]:
    """What ``snodo serve --protocol PATH [--mode MODE]`` with ``SNODO_HOME=home`` would refuse
    at start-up (then a host shows only a server with one ``unavailable`` tool), and notes on
    what it would serve with a warning; the protocol when it loads."""
    from snodo.plugin.host import get_plugin_manager  # noqa: PLC0415 only `doctor --host` loads what serve would
    from snodo.protocol import load_protocol  # noqa: PLC0415 only `doctor --host` loads what serve would
    from snodo.protocol.committed import refuse_drift, resolve  # noqa: PLC0415 only `doctor --host` loads what serve would

    problems: list[str] = []
    try:
        in_force = resolve(path)
        refuse_drift(path, in_force)
        protocol = load_protocol(path, get_plugin_manager(), in_force=in_force).protocol
    except SnodoError as exc:
        return None, [f"serve would refuse to start: {exc}"]
    if in_force.warning:
        problems.append(f"{NOTE}{in_force.warning}: a host's own edit of it changes the rules of the next session")
    if mode is not None and mode not in (known := [m.mode_id for m in protocol.modes]):
        problems.append(f"--mode {mode!r} is not a mode of this protocol (it defines: {', '.join(known)})")
    if protocol.execution.sandbox != "off":
        from snodo.sandbox import choose_backend  # noqa: PLC0415 only when the protocol confines

        try:
            choose_backend()
        except SnodoError as exc:
            problems.append(
                f"{NOTE}no sandbox backend works here, so every run_tests and confined validator fails closed: "
                f"{exc.message} (`snodo doctor` says more)"
            )
    problems += [f"{NOTE}{n}" for n in _key_notes(home)]
    return protocol, problems


def _key_notes(home: Path) -> list[str]:
    """The home's keys: missing (serve makes new ones, a new identity) or not listed in the
    ``allowed_signers`` in force (decisions made with them do not count)."""
    from snodo.state.audit_key import audit_public_key  # noqa: PLC0415 only `doctor --host` reads the keys
    from snodo.state.home import keys_dir  # noqa: PLC0415 only `doctor --host` reads the keys
    from snodo.state.keys import DECISION_PUBLIC_KEY_FILE, load_public_key_file  # noqa: PLC0415 only `doctor --host` reads the keys
    from snodo.state.signers import parse_allowed_signers  # noqa: PLC0415 only `doctor --host` reads the keys

    try:
        public = keys_dir(home) / DECISION_PUBLIC_KEY_FILE
        mine = [k for k in (audit_public_key(home), load_public_key_file(public) if public.is_file() else None) if k]
    except (SnodoError, OSError) as exc:
        return [f"the keys of the snodo home {home} cannot be read: {exc}"]
    if not mine:
        return [
            f"the snodo home {home} has no keys yet: serve makes new ones, a new identity to every project "
            "(set SNODO_HOME in the entry to the home you use with `snodo authorize`)"
        ]
    from snodo.protocol.committed import lists_in_force  # noqa: PLC0415 what resolving the protocol above found

    listed = set()
    for text in lists_in_force:
        with contextlib.suppress(SnodoError):
            listed |= {s.key.public_bytes_raw() for s in parse_allowed_signers(text, "allowed_signers") if s.key}
    if listed and not listed & {k.public_bytes_raw() for k in mine}:
        return [f"the keys of the snodo home {home} are not in the project's allowed_signers in force"]
    return []


def _writers(host: str, data: dict[str, Any], path: Path) -> tuple[str, ...]:
    """The host's own tools that still write to the project under this config."""
    if host == "opencode":
        tools, permission = data.get("tools") or {}, data.get("permission") or {}
        open_ = []
        for tool in _OPENCODE_WRITERS:
            rule = permission.get("bash" if tool == "bash" else "edit")
            if tools.get(tool) is not False and rule != "deny":
                open_.append(tool)
        return tuple(open_)
    if host == "codex":
        mode = data.get("sandbox_mode", "workspace-write (the default for trusted projects)")
        return () if mode == "read-only" else (f"shell and apply_patch (sandbox_mode = {mode})",)
    return (OPEN_DOORS[host],)


def claude_settings_files(config: Path, project: Path) -> list[Path]:
    """Every settings file Claude Code reads, lowest precedence first: the user's, the
    project's shared and local ones, then ``config`` (loaded with ``--settings``)."""
    return [
        Path("~/.claude/settings.json").expanduser(),
        project / ".claude" / "settings.json",
        project / ".claude" / "settings.local.json",
        config,
    ]


def _claude_settings(config: Path, data: dict[str, Any]) -> dict[str, Any]:
    """Claude Code's settings merged as it merges them: ``env`` key by key (a later file
    wins), permission rules added up (a deny anywhere holds)."""
    merged: dict[str, Any] = {"env": {}, "deny": set(), "files": []}
    for file in claude_settings_files(config, Path.cwd()):
        try:
            found = data if file == config else json.loads(file.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            continue
        if not isinstance(found, dict):
            continue
        merged["files"].append(str(file))
        env, permissions = found.get("env"), found.get("permissions")
        if isinstance(env, dict):
            merged["env"].update(env)
        if isinstance(permissions, dict) and isinstance(permissions.get("deny"), list):
            merged["deny"] |= {str(rule) for rule in permissions["deny"]}
    return merged


def _claude_writers(settings: dict[str, Any]) -> tuple[str, ...]:
    denied = settings.get("deny") or set()
    return tuple(t for t in CLAUDE_CODE_WRITERS if t not in denied)


def _claude_user_entry(project: Path) -> dict[str, Any] | None:
    """A ``snodo`` server added with ``claude mcp add`` (``~/.claude.json``: user scope, or
    local scope under the project's path)."""
    try:
        data = json.loads(Path("~/.claude.json").expanduser().read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    scoped = ((data.get("projects") or {}).get(str(project.resolve())) or {}).get("mcpServers") or {}
    entry = scoped.get("snodo") or (data.get("mcpServers") or {}).get("snodo")
    return entry if isinstance(entry, dict) else None
