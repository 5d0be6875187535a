"""A server that could not start still tells the person why, through the host.

Hosts show little of a server that exits before the handshake ("Connection closed") and
carry on without its tools. So when ``snodo serve`` cannot load its protocol or mode, it
completes ``initialize`` with instructions that name the problem and the fix, serves no
tool at all, answers the host's first ``tools/list`` (or any call) with one error saying
the same, and exits once that answer is out (or the host leaves, or a minute passes).
"""

from __future__ import annotations

import contextlib

from snodo import __version__
from snodo.errors import ProtocolError, SnodoError

#: The longest a failed server waits for the host to ask for its tools.
LINGER = 60.0
#: How long the error answer is given to reach the host before the process ends.
FLUSH = 1.0


def failure_text(exc: SnodoError) -> str:
    """One message: what went wrong (with the first problems listed) and how to fix it."""
    lines = [f"snodo could not start, so no governed tool is available: {exc.message}"]
    problems = exc.problems if isinstance(exc, ProtocolError) else ()
    lines += [f"  - {p}" for p in problems[:8]]
    if len(problems) > 8:
        lines.append(f"  … and {len(problems) - 8} more (`snodo protocol check` lists them)")
    lines.append(f"Fix: {exc.hint}" if exc.hint else "Fix: run the same `snodo serve` command in a terminal to see why")
    return "\n".join(lines)


def serve_failure(exc: SnodoError) -> None:
    """Serve the failure on stdin/stdout, then return (the caller exits non-zero)."""
    import anyio  # the MCP SDK only when there is a failure to serve
    from mcp import types
    from mcp.server.lowlevel import Server
    from mcp.server.stdio import stdio_server
    from mcp.shared.exceptions import MCPError

    text = failure_text(exc)
    answered = anyio.Event()

    async def refuse_listing(_ctx: object, _params: object) -> types.ListToolsResult:
        answered.set()
        raise MCPError(types.INTERNAL_ERROR, text)

    async def refuse_call(_ctx: object, _params: object) -> types.CallToolResult:
        answered.set()
        raise MCPError(types.INTERNAL_ERROR, text)

    server: Server[object] = Server(
        "snodo",
        version=__version__,
        title="snodo — not started",
        instructions=text,
        on_list_tools=refuse_listing,
        on_call_tool=refuse_call,
    )

    async def main() -> None:
        async with stdio_server() as (read_stream, write_stream), anyio.create_task_group() as group:

            async def run() -> None:
                await server.run(read_stream, write_stream, server.create_initialization_options())
                group.cancel_scope.cancel()  # the host left

            group.start_soon(run)
            with anyio.move_on_after(LINGER):
                await answered.wait()
            await anyio.sleep(FLUSH)
            group.cancel_scope.cancel()

    with contextlib.suppress(Exception):  # a host that went away mid-answer; the caller reports the real error
        anyio.run(main)
