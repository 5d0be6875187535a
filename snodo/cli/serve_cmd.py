"""``snodo serve``: one mode's tools to an agent over MCP (stdio); a protocol or mode that
does not load serves only the problem (:func:`snodo.mcp.server.serve_failure`)."""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from snodo.base.errors import SnodoError
from snodo.cli.common import load_project, protocol_option
from snodo.cli.output import emit_json, print_note
from snodo.mcp.hostconfig import HOSTS, OPEN_DOORS
from snodo.state.sessions import load_project_state

if TYPE_CHECKING:
    from snodo.governance.service import Project


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
    Exactly the tools the mode's capabilities grant are listed, every other name refused.
    validate_task returns pass, escalate, blocker or validator_error; a person decides an
    escalation with `snodo authorize <decision_id>`. Every call is audited.

    \b
    Configure your MCP host with the snippet for this project (docs/mcp-hosts.md):
      snodo serve --print-config opencode > opencode.json
      snodo serve --print-config codex > ~/.codex/snodo.config.toml
      snodo serve --print-config claude-code > .claude/snodo.json
      snodo serve --print-config claude-desktop|cursor|vscode|generic
    The server finds the project from --protocol, else from its working directory.
    """
    try:
        loaded, host = load_project(protocol_path, refuse_drift=print_config is None)
        # as Project chooses it; an unknown mode names the available ones
        chosen = mode_id or load_project_state(loaded.root).current_mode or loaded.protocol.start_mode
        mode = loaded.protocol.mode(chosen)
    except SnodoError as exc:
        if print_config is None and not sys.stdin.isatty():  # a host started us: tell it, through MCP
            from snodo.mcp.server import serve_failure  # noqa: PLC0415 the MCP SDK and server only when serving

            serve_failure(exc)
        raise
    if print_config is not None:
        from snodo.governance.service import Project  # noqa: PLC0415 the governance stack only for --print-config

        project = Project(loaded, host, mode=mode.mode_id)
        config = host_config(print_config, loaded.path.resolve(), loaded.root.resolve(), mode_id, project)
        if isinstance(config, str):
            click.echo(config, nl=False)
        else:
            emit_json(config)
        print_note(f"put this in {HOSTS[print_config][0]}; docs/mcp-hosts.md explains each field")
        print_note(f"still open in this host: {OPEN_DOORS[print_config]}")
        return

    from snodo.mcp.server import Served, serve_stdio  # noqa: PLC0415 the MCP SDK and server only when serving

    serve_stdio(Served(loaded, host, mode))  # the governance stack is built after the handshake


def snodo_command() -> list[str]:
    """The ``snodo`` this process runs as, absolute, so a host with another PATH starts it."""
    script = Path(sys.executable).parent / ("snodo.exe" if os.name == "nt" else "snodo")
    if script.is_file():
        return [str(script.absolute())]
    # -I: the host's working directory is not on sys.path, so an agent's `snodo/` cannot stand in
    return [str(Path(sys.executable).absolute()), "-I", "-m", "snodo"]


def host_config(host: str, protocol: Path, root: Path, mode_id: str | None, project: Project) -> dict[str, Any] | str:
    """The config for ``host`` (:mod:`snodo.mcp.hostconfig`): an absolute command, ``--protocol``
    (hosts start servers in differing directories), ``SNODO_HOME``, a call timeout for the
    protocol's limits, the host's own doors closed where it can. Codex's is TOML text."""
    from snodo.mcp import hostconfig  # noqa: PLC0415 the MCP SDK and server only when serving

    command = [*snodo_command(), "serve", "--protocol", str(protocol)] + (["--mode", mode_id] if mode_id else [])
    env = {"SNODO_HOME": os.environ.get("SNODO_HOME") or str(project.home.absolute())}
    timeout = hostconfig.call_timeout(project.protocol)
    entry = hostconfig.server_entry(host, command, env, root, timeout)
    if host == "opencode":
        return hostconfig.opencode_config(entry)
    if host == "codex":
        return hostconfig.codex_config(entry, timeout, root)
    if host == "claude-code":
        return hostconfig.claude_code_config(entry, timeout)
    key = HOSTS[host][1]
    return {key: {"snodo": entry}} if key else entry
