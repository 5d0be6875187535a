"""The stdio transport of ``snodo serve``: the SDK's :func:`~mcp.server.stdio.stdio_server`, which
claims descriptors 0 and 1 while serving, with one property added: the end of input ends the
session only once every request read has been answered (``printf … | snodo serve`` gets every
answer), the client stopped reading, or :data:`DRAIN_LIMIT` seconds passed.
"""

from __future__ import annotations

import fcntl
import os
import select
import time
from typing import Any

import anyio

#: Seconds the end of input waits, at most, for the requests still running to be answered.
DRAIN_LIMIT = 600.0


#: The ids of the requests read from the client and not answered or cancelled yet (one session
#: per process), and a duplicate of the client's end of stdout, only polled.
_PENDING: set[object] = set()
_WIRE = [-1]


def _client_reads() -> bool:
    """Whether the client still reads stdout (its end not closed)."""
    poller = select.poll()
    poller.register(_WIRE[0], select.POLLOUT)
    return not any(event & (select.POLLERR | select.POLLHUP) for _fd, event in poller.poll(0))


def answered(timeout: float) -> bool:
    """From any thread: wait up to ``timeout`` seconds until every request read is answered
    (or the client stopped reading); whether that happened."""
    deadline = time.monotonic() + timeout
    while _PENDING and _client_reads():
        if time.monotonic() >= deadline:
            return False
        time.sleep(0.01)
    return True


def run_stdio(server: Any) -> None:
    """Run the SDK ``server`` on stdin/stdout until the client leaves, its streams relayed so
    that every request read and every answer written is noted."""
    from mcp import types  # noqa: PLC0415 the SDK only once serving (the module imports without it)
    from mcp.server.stdio import stdio_server  # noqa: PLC0415 the SDK only once serving

    async def relay_requests(source: Any, sink: Any) -> None:
        async with sink:
            async for item in source:
                message = getattr(item, "message", None)
                if isinstance(message, types.JSONRPCRequest):
                    _PENDING.add(message.id)
                elif isinstance(message, types.JSONRPCNotification) and message.method == "notifications/cancelled":
                    _PENDING.discard((message.params or {}).get("requestId"))  # answered or not, not waited for
                await sink.send(item)
            await anyio.to_thread.run_sync(answered, DRAIN_LIMIT, abandon_on_cancel=True)

    async def relay_answers(source: Any, sink: Any) -> None:
        async with source, sink:
            async for item in source:
                await sink.send(item)
                message = getattr(item, "message", None)
                if isinstance(message, (types.JSONRPCResponse, types.JSONRPCError)):
                    _PENDING.discard(message.id)

    async def main() -> None:
        requests_in, requests = anyio.create_memory_object_stream[Any](0)
        answers, answers_out = anyio.create_memory_object_stream[Any](0)
        async with stdio_server() as (read_stream, write_stream), anyio.create_task_group() as group:
            group.start_soon(relay_requests, read_stream, requests_in)
            group.start_soon(relay_answers, answers_out, write_stream)
            await server.run(requests, answers, server.create_initialization_options())

    _WIRE[0] = fcntl.fcntl(1, fcntl.F_DUPFD_CLOEXEC, 3)  # taken before the SDK points 1 at stderr
    try:
        anyio.run(main)
    finally:
        os.close(_WIRE[0])
