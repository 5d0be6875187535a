"""The SDK's own floor: a low-level MCP server on stdio with one tool that does nothing.

Run by ``mcp_roundtrip.py`` as ``python -I _mcp_floor.py [--thread]`` (``--smoke``: build
the server and exit, as CI runs every script here): the same official
SDK, transport and client as ``snodo serve``, with none of snodo's work, so its round trip
is what no change to snodo can go below. ``--thread`` answers from a worker thread, the hop
every snodo tool call takes (tool work is synchronous).
"""

from __future__ import annotations

import sys
from typing import Any

import anyio
import anyio.to_thread
from mcp import types
from mcp.server.lowlevel import Server
from mcp.server.stdio import stdio_server

THREAD = "--thread" in sys.argv[1:]
NOOP = types.Tool(name="noop", description="does nothing", input_schema={"type": "object", "properties": {}})


async def list_tools(_ctx: Any, _params: types.PaginatedRequestParams | None) -> types.ListToolsResult:
    return types.ListToolsResult(tools=[NOOP])


async def call_tool(_ctx: Any, _params: types.CallToolRequestParams) -> types.CallToolResult:
    if THREAD:
        await anyio.to_thread.run_sync(lambda: None)
    return types.CallToolResult(content=[types.TextContent(type="text", text="ok")], is_error=False)


def build() -> Server[Any]:
    return Server("floor", version="0", on_list_tools=list_tools, on_call_tool=call_tool)


async def main() -> None:
    server = build()
    async with stdio_server() as (read_stream, write_stream):
        await server.run(read_stream, write_stream, server.create_initialization_options())


if __name__ == "__main__":
    if "--smoke" in sys.argv[1:]:  # CI runs every script so: the server builds, nothing is served
        build().create_initialization_options()
    else:
        anyio.run(main)
