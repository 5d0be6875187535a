"""``snodo doctor --host HOST [CONFIG]``: is snodo connected as the host's config says, and
which of the host's own tools still write to the project (docs/mcp-hosts.md). Nothing of the
host is started: its ``snodo`` entry is checked as ``serve`` checks itself at start-up.
"""

from __future__ import annotations

import contextlib
import json
import os
import tomllib
from functools import partial
from pathlib import Path
from typing import Any

from attrs import asdict, frozen

from snodo.base.errors import SnodoError
from snodo.mcp.hostconfig import CLAUDE_CODE_WRITERS, HOSTS, OPEN_DOORS, call_timeout
from snodo.plugin.host import get_plugin_manager
from snodo.protocol import load_protocol
from snodo.protocol.committed import lists_in_force, refuse_drift, resolve
from snodo.sandbox import choose_backend
from snodo.state.audit_key import audit_public_key
from snodo.state.home import keys_dir
from snodo.state.keys import DECISION_PUBLIC_KEY_FILE, load_public_key_file
from snodo.state.signers import parse_allowed_signers

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
        return asdict(self)


def check_host(host: str, config: Path | None) -> HostReport:
    path = _config_path(host, config)
    report = partial(HostReport, host=host, config=str(path))
    try:
        text = path.read_text(encoding="utf-8")
        data: dict[str, Any] = tomllib.loads(text) if host == "codex" else json.loads(text)
    except (OSError, ValueError) as exc:
        return report(connected=False, problems=(f"cannot read {path}: {exc}",), open_writers=())
    if not isinstance(data, dict):
        return report(connected=False, problems=(f"cannot read {path}: not a JSON object",), open_writers=())
    entry = _entry(host, data)
    if entry is None:
        missing = f"no server named 'snodo' under {HOSTS[host][1]!r}; `snodo serve --print-config {host}` prints one"
        return report(connected=False, problems=(missing,), open_writers=_writers(host, data))
    argv, env = _command(host, entry)
    protocol = _option(argv, "--protocol")
    problems = _command_problems(argv, protocol)
    if entry.get("enabled") is False:
        problems.append("the snodo server is disabled (enabled = false)")
    needed = _needed_timeout(protocol, _option(argv, "--mode"), env, problems)
    connected = not [p for p in problems if not p.startswith(NOTE)]  # notes: connected, not governed as printed
    if host == "claude-code":
        settings = _claude_settings(path, data)
        writers = tuple(t for t in CLAUDE_CODE_WRITERS if t not in settings["deny"])
    else:
        settings, writers = {"env": {}}, _writers(host, data)
    problems += _setting_problems(host, entry, settings, needed)
    return report(connected=connected, problems=tuple(problems), open_writers=writers)


def _option(argv: list[str], name: str) -> str | None:
    return argv[argv.index(name) + 1] if name in argv[:-1] else None


def _config_path(host: str, config: Path | None) -> Path:
    path = (config or Path(DEFAULT_PATHS[host])).expanduser()
    if config is None and host == "claude-code" and not path.is_file():
        return Path(".mcp.json")
    return path


def _entry(host: str, data: dict[str, Any]) -> dict[str, Any] | None:
    key = HOSTS[host][1]
    entry = data if not key else _at(data, key, "snodo")
    if host == "claude-code" and not isinstance(entry, dict):  # `claude mcp add` keeps it in ~/.claude.json
        entry = _claude_user_entry(Path.cwd())
    return entry if isinstance(entry, dict) else None


def _command(host: str, entry: dict[str, Any]) -> tuple[list[str], dict[str, Any]]:
    """The entry's command line and environment, in the host's spelling."""
    if host == "opencode":
        argv, env = entry.get("command"), entry.get("environment")
    else:
        args = entry.get("args")
        argv, env = [entry.get("command", ""), *(args if isinstance(args, list) else ())], entry.get("env")
    return [str(a) for a in argv] if isinstance(argv, list) else [], env if isinstance(env, dict) else {}


def _setting_problems(host: str, entry: dict[str, Any], settings: dict[str, Any], needed: float | None) -> list[str]:
    """What the host's own settings for the snodo entry get wrong; none of it disconnects snodo."""
    problems: list[str] = []
    waits = str(settings["env"].get("MCP_CONNECTION_NONBLOCKING", "")).lower() in ("false", "0")
    if host == "claude-code" and not waits:
        problems.append(
            "Claude Code starts its first turn before snodo is connected (`claude -p` does not wait for MCP "
            'servers): set "env": {"MCP_CONNECTION_NONBLOCKING": "false"} in its settings'
        )
    problems += _timeout_problems(host, entry, settings, needed)
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


def _timeout_problems(host: str, entry: dict[str, Any], settings: dict[str, Any], needed: float | None) -> list[str]:
    """Whether the host's call timeout covers what the protocol needs (hosts with a setting for it)."""
    if host == "claude-code":
        ms = str(settings["env"].get("MCP_TOOL_TIMEOUT") or "")
        got = int(ms) / 1000 if ms.isdigit() else None
    else:
        got = entry.get("timeout", 0) / 1000 if host == "opencode" else entry.get("tool_timeout_sec")
    if host not in ("opencode", "codex", "claude-code") or not needed or (got and got >= needed):
        return []
    return [f"the call timeout is {got or 'the host default'} s; run_tests and the validators need {needed} s"]


def _command_problems(argv: list[str], protocol: str | None) -> list[str]:
    problems = []
    program = Path(argv[0]) if argv and argv[0] else None
    if program is None or not program.is_absolute():
        problems.append(f"the command {argv[:1]} is not an absolute path; hosts do not start servers from your shell")
    elif not os.access(program, os.X_OK):
        problems.append(f"{program} is not an executable file")
    if "serve" not in argv:
        problems.append("the command does not run `snodo serve`")
    if protocol is None:
        problems.append("no --protocol: the project then depends on the host's working directory")
    elif not Path(protocol).is_file():
        problems.append(f"--protocol {Path(protocol)} does not exist")
    return problems


#: A problem that leaves snodo connected (it starts and serves) but not as governed as printed.
NOTE = "note: "


def _needed_timeout(protocol: str | None, mode: str | None, env: dict[str, Any], problems: list[str]) -> float | None:
    """The call timeout the protocol the command pins needs. Added to ``problems``: what ``serve``
    would refuse at start-up (a host then shows only a server with one ``unavailable`` tool),
    and notes on what it would serve with a warning."""
    if protocol is None or not Path(protocol).is_file():
        return None
    try:
        in_force = resolve(Path(protocol))
        refuse_drift(Path(protocol), in_force)
        loaded = load_protocol(Path(protocol), get_plugin_manager(), in_force=in_force).protocol
    except SnodoError as exc:
        problems.append(f"serve would refuse to start: {exc}")
        return None
    if in_force.warning:
        problems.append(f"{NOTE}{in_force.warning}: a host's own edit of it changes the rules of the next session")
    if mode not in (None, *(known := [m.mode_id for m in loaded.modes])):
        problems.append(f"--mode {mode!r} is not a mode of this protocol (it defines: {', '.join(known)})")
    if loaded.execution.sandbox != "off":
        try:
            choose_backend()
        except SnodoError as exc:
            problems.append(
                f"{NOTE}no sandbox backend works here, so every run_tests and confined validator fails closed: "
                f"{exc.message} (`snodo doctor` says more)"
            )
    problems += [f"{NOTE}{n}" for n in _key_notes(env)]
    return call_timeout(loaded)


def _key_notes(env: dict[str, Any]) -> list[str]:
    """The keys of the home the entry's environment names: missing (serve makes new ones, a new
    identity) or not listed in the ``allowed_signers`` in force (decisions made with them do not count)."""
    home = Path(str(env.get("SNODO_HOME") or os.environ.get("SNODO_HOME") or "~/.snodo")).expanduser()
    public = keys_dir(home) / DECISION_PUBLIC_KEY_FILE
    try:
        keys = [audit_public_key(home), load_public_key_file(public) if public.is_file() else None]
    except (SnodoError, OSError) as exc:
        return [f"the keys of the snodo home {home} cannot be read: {exc}"]
    mine = {k.public_bytes_raw() for k in keys if k}
    if not mine:
        return [
            f"the snodo home {home} has no keys yet: serve makes new ones, a new identity to every project "
            "(set SNODO_HOME in the entry to the home you use with `snodo authorize`)"
        ]
    listed = _signers_in_force()
    if listed and not listed & mine:
        return [f"the keys of the snodo home {home} are not in the project's allowed_signers in force"]
    return []


def _signers_in_force() -> set[bytes]:
    """The keys of the ``allowed_signers`` lists resolving the protocol found in force."""
    listed = set()
    for text in lists_in_force:
        with contextlib.suppress(SnodoError):
            listed |= {s.key.public_bytes_raw() for s in parse_allowed_signers(text, "allowed_signers") if s.key}
    return listed


def _writers(host: str, data: dict[str, Any]) -> tuple[str, ...]:
    """The host's own tools that still write to the project under this config."""
    if host == "opencode":
        tools, permission = (found if isinstance(found := data.get(k), dict) else {} for k in ("tools", "permission"))
        return tuple(
            tool
            for tool in _OPENCODE_WRITERS
            if tools.get(tool) is not False and permission.get("bash" if tool == "bash" else "edit") != "deny"
        )
    if host == "codex":
        mode = data.get("sandbox_mode", "workspace-write (the default for trusted projects)")
        return () if mode == "read-only" else (f"shell and apply_patch (sandbox_mode = {mode})",)
    return (OPEN_DOORS[host],)


def _claude_settings(config: Path, data: dict[str, Any]) -> dict[str, Any]:
    """Claude Code's settings merged as it merges them: ``env`` key by key (a later file
    wins), permission rules added up (a deny anywhere holds)."""
    merged: dict[str, Any] = {"env": {}, "deny": set()}
    project = Path.cwd()
    # lowest precedence first; ``config`` is the file loaded with ``--settings``
    user = Path("~/.claude/settings.json").expanduser()
    for file in (user, project / ".claude" / "settings.json", project / ".claude" / "settings.local.json", config):
        try:
            found = data if file == config else json.loads(file.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            continue
        if not isinstance(found, dict):
            continue
        env, permissions = found.get("env"), found.get("permissions")
        if isinstance(env, dict):
            merged["env"].update(env)
        if isinstance(permissions, dict) and isinstance(permissions.get("deny"), list):
            merged["deny"] |= {str(rule) for rule in permissions["deny"]}
    return merged


def _claude_user_entry(project: Path) -> dict[str, Any] | None:
    """A ``snodo`` server added with ``claude mcp add`` (``~/.claude.json``: user scope, or
    local scope under the project's path)."""
    try:
        data = json.loads(Path("~/.claude.json").expanduser().read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    entry = _at(data, "projects", str(project.resolve()), "mcpServers", "snodo") or _at(data, "mcpServers", "snodo")
    return entry if isinstance(entry, dict) else None


def _at(data: Any, *keys: str) -> Any:
    """``data[k1][k2]…``, or ``None`` where a level is missing or not an object (a file a
    person edits may hold anything)."""
    for key in keys:
        if not isinstance(data, dict):
            return None
        data = data.get(key)
    return data
