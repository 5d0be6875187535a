"""``snodo serve``: expose one mode's tools to an agent over MCP (stdio).

The MCP SDK is imported inside the command only, so ``snodo --help`` and every other
command stay fast and work without it. The protocol and the mode are checked before
anything is served: a protocol that does not load, or a mode it does not define, serves no
tool at all. Started by a host (stdin not a terminal), the server still completes the
handshake and answers with the problem and its fix (:mod:`snodo.mcp.failed`), so the
person sees it in the host; then the command exits non-zero with the same message.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Any

import click

from snodo.cli.common import load_project, protocol_option

#: host -> (where the snippet goes, the key holding the servers)
HOSTS: dict[str, tuple[str, str]] = {
    "claude-code": (
        ".mcp.json at the project root (or `claude mcp add-json snodo '<the inner object>'`)",
        "mcpServers",
    ),
    "claude-desktop": ("claude_desktop_config.json (Settings → Developer → Edit Config)", "mcpServers"),
    "cursor": (".cursor/mcp.json in the project (or ~/.cursor/mcp.json for every project)", "mcpServers"),
    "vscode": (".vscode/mcp.json in the workspace", "servers"),
    "generic": ("your MCP host's stdio server settings: command, args, working directory, environment", ""),
}


@click.command()
@click.option(
    "--mode", "mode_id", default=None, help="Mode whose tools are served (default: the project's current mode)."
)
@click.option(
    "--print-config",
    "print_config",
    type=click.Choice(list(HOSTS)),
    default=None,
    help="Print the MCP host configuration that serves this project, then exit (docs/mcp-hosts.md).",
)
@protocol_option
def serve(mode_id: str | None, print_config: str | None, protocol_path: Path | None) -> None:
    """Serve one mode's tools to an agent over MCP on stdin/stdout.

    \b
    The server lists exactly the tools the mode's capabilities grant and refuses every
    other name. validate_task returns one of four outcomes (pass, escalate, blocker,
    validator_error); an escalation is decided out of band by a person running
    `snodo authorize <decision_id>`. Every call is audited.

    \b
    Configure your MCP host with the snippet for this project (docs/mcp-hosts.md):
      snodo serve --print-config claude-code > .mcp.json
      snodo serve --print-config claude-desktop|cursor|vscode|generic
    The server finds the project from --protocol, else from its working directory.
    """
    from snodo.errors import SnodoError
    from snodo.governance.service import Project

    try:
        loaded, host = load_project(protocol_path, refuse_drift=print_config is None)
        project = Project(loaded, host, mode=mode_id)  # an unknown mode names the available ones
    except SnodoError as exc:
        if print_config is None and not sys.stdin.isatty():  # a host started us: tell it, through MCP
            from snodo.mcp.failed import serve_failure

            serve_failure(exc)
        raise
    if print_config is not None:
        from snodo.cli.output import emit_json, err_console

        emit_json(host_config(print_config, loaded.path.resolve(), loaded.root.resolve(), mode_id))
        where = HOSTS[print_config][0]
        err_console().print(f"put this in {where}; docs/mcp-hosts.md explains each field", markup=False)
        return

    from snodo.mcp.server import serve_stdio

    serve_stdio(project)


def snodo_command() -> list[str]:
    """The ``snodo`` this process runs as, absolute, so a host with another PATH starts it."""
    script = Path(sys.executable).parent / ("snodo.exe" if os.name == "nt" else "snodo")
    if script.is_file():
        return [str(script.absolute())]
    # -I: the project (or whatever directory the host starts in) is never on sys.path,
    # so a `snodo/` package an agent wrote there cannot stand in for snodo.
    return [str(Path(sys.executable).absolute()), "-I", "-m", "snodo"]


def host_config(host: str, protocol: Path, root: Path, mode_id: str | None) -> dict[str, Any]:
    """One stdio server entry for ``host``: an absolute command, ``--protocol`` pinning the
    project (hosts differ in the working directory they start servers in), and the cwd."""
    command, *prefix = snodo_command()
    args = [*prefix, "serve", "--protocol", str(protocol)] + (["--mode", mode_id] if mode_id else [])
    entry: dict[str, Any] = {"command": command, "args": args}
    if host in ("vscode", "claude-code"):
        entry = {"type": "stdio", **entry}
    if host == "generic":
        entry["cwd"] = str(root)  # any directory works: --protocol pins the project
    env = {k: os.environ[k] for k in ("SNODO_HOME",) if os.environ.get(k)}
    if env:
        entry["env"] = env
    key = HOSTS[host][1]
    return {key: {"snodo": entry}} if key else entry
