"""The stdio transport of ``snodo serve``: the SDK's :func:`~mcp.server.stdio.stdio_server`, which
claims descriptors 0 and 1 while serving, with one property added: the end of input ends the
session only once every request read has been answered (``printf … | snodo serve`` gets every
answer), the client stopped reading, or :data:`DRAIN_LIMIT` seconds passed.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import select
import time
from collections.abc import AsyncIterator
from typing import Any, Self

import anyio

#: Seconds the end of input waits, at most, for the requests still running to be answered.
DRAIN_LIMIT = 600.0


class _Pending:
    """The ids of the requests read from the client and not answered or cancelled yet."""

    def __init__(self, wire: int) -> None:
        from mcp import types  # noqa: PLC0415 the SDK only once serving (the module imports without it)

        self.types = types
        self.ids: set[object] = set()
        self.wire = wire  # a duplicate of the client's end of stdout, only polled
        self.changed = anyio.Event()

    def read(self, message: Any) -> None:
        if isinstance(message, self.types.JSONRPCRequest):
            self.ids.add(message.id)
        elif isinstance(message, self.types.JSONRPCNotification) and message.method == "notifications/cancelled":
            self.answered((message.params or {}).get("requestId"))  # answered or not, no longer waited for

    def answered(self, ident: object) -> None:
        self.ids.discard(ident)
        self.changed.set()

    def client_reads(self) -> bool:
        """Whether the client still reads stdout (its end not closed)."""
        poller = select.poll()
        poller.register(self.wire, select.POLLOUT)
        return not any(event & (select.POLLERR | select.POLLHUP) for _fd, event in poller.poll(0))

    async def drained(self) -> None:
        """Once every request read is answered, the client stopped reading, or time is up."""
        with anyio.move_on_after(DRAIN_LIMIT):
            while self.ids and self.client_reads():
                self.changed = anyio.Event()
                with anyio.move_on_after(0.5):
                    await self.changed.wait()


class _Wrapped:
    """One of the SDK's message streams, passed through with :class:`_Pending` told of each message."""

    def __init__(self, inner: Any, pending: _Pending) -> None:
        self._inner = inner
        self._pending = pending

    async def aclose(self) -> None:
        await self._inner.aclose()

    def close(self) -> None:
        self._inner.close()

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()


class _Requests(_Wrapped):
    """The messages read from stdin; their end waits for :meth:`_Pending.drained`."""

    @property
    def last_context(self) -> Any:
        return getattr(self._inner, "last_context", None)

    async def receive(self) -> Any:
        try:
            item = await self._inner.receive()
        except anyio.EndOfStream:
            await self._pending.drained()
            raise
        self._pending.read(getattr(item, "message", None))
        return item

    def __aiter__(self) -> _Requests:
        return self

    async def __anext__(self) -> Any:
        try:
            return await self.receive()
        except anyio.EndOfStream:
            raise StopAsyncIteration from None


class _Answers(_Wrapped):
    """The messages written to stdout, each answer noted."""

    async def send(self, item: Any) -> None:
        await self._inner.send(item)
        message = getattr(item, "message", None)
        if isinstance(message, (self._pending.types.JSONRPCResponse, self._pending.types.JSONRPCError)):
            self._pending.answered(message.id)


#: The requests of the session being served (one per process).
_SERVING: list[_Pending] = []


def answered(timeout: float) -> bool:
    """From any thread: wait up to ``timeout`` seconds until every request read is answered
    (or the client stopped reading); whether that happened."""
    deadline = time.monotonic() + timeout
    while _SERVING and _SERVING[0].ids and _SERVING[0].client_reads():
        if time.monotonic() >= deadline:
            return False
        time.sleep(0.01)
    return True


@contextlib.asynccontextmanager
async def serve_stdio_streams() -> AsyncIterator[tuple[Any, Any]]:
    """The SDK's read and write streams of MCP messages over stdin and stdout."""
    from mcp.server.stdio import stdio_server  # noqa: PLC0415 the SDK only once serving

    wire = fcntl.fcntl(1, fcntl.F_DUPFD_CLOEXEC, 3)  # taken before the SDK points 1 at stderr
    try:
        pending = _Pending(wire)
        _SERVING[:] = [pending]
        async with stdio_server() as (read_stream, write_stream):
            yield _Requests(read_stream, pending), _Answers(write_stream, pending)
    finally:
        os.close(wire)
