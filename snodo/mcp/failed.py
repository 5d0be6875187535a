"""A server that could not start still tells the person why, through the host.

Hosts show little of a server that exits before the handshake, but every host shows a
server's tools and their results. So ``snodo serve`` that cannot load its protocol or mode
answers ``initialize`` with the problem and its fix as instructions and lists one tool,
``unavailable``, whose description and every result are that message; to Codex, which shows
a failed listing's error but not a tool's result, the listing is that error.
"""

from __future__ import annotations

import contextlib

from snodo import __version__
from snodo.base.errors import ProtocolError, SnodoError
from snodo.mcp.stdio import run_stdio

#: The one tool a failed server lists; hosts show it prefixed (``snodo_unavailable``).
UNAVAILABLE = "unavailable"
#: Clients (``clientInfo.name``) that stop on a failed listing and print its error.
STOPS_ON_FAILED_LISTING = frozenset({"codex-mcp-client"})


def failure_text(exc: SnodoError) -> str:
    """One message: what went wrong (with the first problems listed) and how to fix it."""
    lines = [f"snodo could not start, so no governed tool is available: {exc.message}"]
    problems = exc.problems if isinstance(exc, ProtocolError) else ()
    lines += [f"  - {p}" for p in problems[:8]]
    if len(problems) > 8:
        lines.append(f"  … and {len(problems) - 8} more (`snodo protocol check` lists them)")
    lines.append(
        f"Fix: {exc.hint}"
        if exc.hint
        else "Fix: correct the `snodo serve` command in this host's MCP config (`snodo doctor --host HOST` "
        "checks it), or run that command in a terminal to see why"
    )
    return "\n".join(lines)


def serve_failure(exc: SnodoError) -> None:
    """Serve the failure on stdin/stdout until the host leaves, then return (the caller exits non-zero)."""
    # the MCP SDK only when there is a failure to serve
    from mcp import types  # noqa: PLC0415
    from mcp.server.context import ServerRequestContext  # noqa: PLC0415
    from mcp.server.lowlevel import Server  # noqa: PLC0415
    from mcp.shared.exceptions import MCPError  # noqa: PLC0415

    text = failure_text(exc)
    tool = types.Tool(
        name=UNAVAILABLE,
        description=text,
        input_schema={"type": "object", "properties": {}},
        annotations=types.ToolAnnotations(read_only_hint=True, idempotent_hint=True),
    )

    async def list_only_unavailable(ctx: ServerRequestContext[object], _params: object) -> types.ListToolsResult:
        client = ctx.session.client_params
        if client is not None and client.client_info.name in STOPS_ON_FAILED_LISTING:
            raise MCPError(types.INTERNAL_ERROR, text)
        return types.ListToolsResult(tools=[tool])

    async def refuse_call(_ctx: object, _params: object) -> types.CallToolResult:
        return types.CallToolResult(content=[types.TextContent(type="text", text=text)], is_error=True)

    server: Server[object] = Server(
        "snodo",
        version=__version__,
        title="snodo — not started",
        instructions=text,
        on_list_tools=list_only_unavailable,
        on_call_tool=refuse_call,
    )
    with contextlib.suppress(Exception):  # a host that went away mid-answer; the caller reports the real error
        run_stdio(server)
