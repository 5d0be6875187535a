"""``snodo serve``: expose one mode's tools to an agent over MCP (stdio).

The MCP SDK is imported inside the command only, so ``snodo --help`` and every other
command stay fast and work without it. The protocol and the mode are checked before
anything is served: a protocol that does not load, or a mode it does not define, ends the
command with a message and a non-zero exit, never a server that half works.
"""

from __future__ import annotations

from pathlib import Path

import click

from snodo.cli.common import load_project, protocol_option


@click.command()
@click.option(
    "--mode", "mode_id", default=None, help="Mode whose tools are served (default: the project's current mode)."
)
@protocol_option
def serve(mode_id: str | None, protocol_path: Path | None) -> None:
    """Serve one mode's tools to an agent over MCP on stdin/stdout.

    \b
    The server lists exactly the tools the mode's capabilities grant and refuses every
    other name. validate_task returns one of four outcomes (pass, escalate, blocker,
    validator_error); an escalation is decided out of band by a person running
    `snodo authorize <decision_id>`. Every call is audited.

    \b
    Example MCP client configuration:
      {"command": "snodo", "args": ["serve", "--mode", "producer"]}
    """
    from snodo.governance.service import Project

    loaded, host = load_project(protocol_path)
    project = Project(loaded, host, mode=mode_id)  # an unknown mode names the available ones

    from snodo.mcp.server import serve_stdio

    serve_stdio(project)
