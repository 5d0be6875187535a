"""``snodo doctor --host HOST [CONFIG]``: read a host's config and say whether snodo is
connected as configured and which of the host's own tools still write to the project.

It reads files only (nothing is started): the entry named ``snodo`` must start an absolute,
executable ``snodo serve`` pinned to an existing protocol with a call timeout long enough
for the protocol's limits (:func:`snodo.mcp.hostconfig.call_timeout`); the host's own
writers are read from the same config where the host keeps them there.
"""

from __future__ import annotations

import contextlib
import json
import os
import tomllib
from pathlib import Path
from typing import Any

from snodo.attrsbase import frozen
from snodo.base.errors import SnodoError
from snodo.mcp.hostconfig import HOSTS, OPEN_DOORS, call_timeout
from snodo.protocol.models import Protocol

#: Where each host's config is looked for when none is given (relative to the working directory).
DEFAULT_PATHS: dict[str, str] = {
    "opencode": "opencode.json",
    "codex": str(Path(os.environ.get("CODEX_HOME", "~/.codex")) / "snodo.config.toml"),
    "claude-code": ".mcp.json",
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
    protocol = _protocol(argv, problems)
    connected = not problems  # what follows leaves snodo connected but the host not governed as printed
    needed = call_timeout(protocol) if protocol is not None else None
    got = entry.get("timeout", 0) / 1000 if host == "opencode" else entry.get("tool_timeout_sec")
    if host in ("opencode", "codex") and needed and (not got or got < needed):
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
    return HostReport(
        host=host,
        config=str(path),
        connected=connected,
        problems=tuple(problems),
        open_writers=_writers(host, data, path),
    )


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


def _protocol(argv: list[str], problems: list[str]) -> Protocol | None:
    """The protocol the command pins, loaded as the server would; its problems (and an unknown
    ``--mode``, which a host shows only as a server with one ``unavailable`` tool) noted."""
    if "--protocol" not in argv[:-1] or not Path(argv[argv.index("--protocol") + 1]).is_file():
        return None
    from snodo.protocol.loader import read_protocol_file  # noqa: PLC0415 `serve --print-config` reads no protocol unless given one

    try:
        protocol = read_protocol_file(Path(argv[argv.index("--protocol") + 1]))
    except SnodoError as exc:
        problems.append(f"the protocol does not load: {exc.message}")
        return None
    if "--mode" in argv[:-1]:
        mode, known = argv[argv.index("--mode") + 1], [m.mode_id for m in protocol.modes]
        if mode not in known:
            problems.append(f"--mode {mode!r} is not a mode of this protocol (it defines: {', '.join(known)})")
    return protocol


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
    if host == "claude-code":
        settings = path.parent / ".claude" / "settings.json"
        denied: set[str] = set()
        with contextlib.suppress(OSError, ValueError, KeyError, TypeError):
            denied = set(json.loads(settings.read_text())["permissions"]["deny"])
        return tuple(t for t in ("Write", "Edit", "MultiEdit", "NotebookEdit", "Bash") if t not in denied)
    return (OPEN_DOORS[host],)
