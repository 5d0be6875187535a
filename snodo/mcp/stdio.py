"""The stdio transport of ``snodo serve``: the SDK's own (:func:`mcp.server.stdio.stdio_server`,
which claims the wire while serving: descriptor 0 reads the null device and descriptor 1
writes to stderr, so no handler and no child process can read a request or write into the
protocol), with one property added.

The end of input ends the session only once every request read has been answered: a script
that pipes its requests in (``printf … | snodo serve``) gets every answer, where the SDK
alone would answer those still running "Connection closed". Until then, or until the client
stops reading (its end of stdout closed), or :data:`DRAIN_LIMIT` seconds: the server reads
the SDK's messages through :class:`_Requests` and answers through :class:`_Answers`, which
keep the ids of the requests read and not answered yet.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import select
import time
from collections.abc import AsyncIterator
from typing import Any

import anyio

#: Seconds the end of input waits, at most, for the requests still running to be answered.
DRAIN_LIMIT = 600.0


class _Pending:
    """The ids of the requests read from the client and not answered or cancelled yet."""

    def __init__(self, wire: int) -> None:
        from mcp import types  # noqa: PLC0415 the SDK's types only once a message is answered

        self.ids: set[object] = set()
        self.wire = wire  # a duplicate of the client's end of stdout, only polled
        self.changed = anyio.Event()
        self._types = types

    def read(self, message: Any) -> None:
        if isinstance(message, self._types.JSONRPCRequest):
            self.ids.add(message.id)
        elif isinstance(message, self._types.JSONRPCNotification) and message.method == "notifications/cancelled":
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


class _Requests:
    """The SDK's stream of messages read from stdin, whose end waits for :meth:`_Pending.drained`."""

    def __init__(self, inner: Any, pending: _Pending) -> None:
        self._inner = inner
        self._pending = pending

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

    async def aclose(self) -> None:
        await self._inner.aclose()

    def close(self) -> None:
        self._inner.close()

    async def __aenter__(self) -> _Requests:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()


class _Answers:
    """The SDK's stream of messages written to stdout, noting each answer sent."""

    def __init__(self, inner: Any, pending: _Pending) -> None:
        self._inner = inner
        self._pending = pending

    async def send(self, item: Any) -> None:
        await self._inner.send(item)
        message = getattr(item, "message", None)
        if isinstance(message, (self._pending._types.JSONRPCResponse, self._pending._types.JSONRPCError)):
            self._pending.answered(message.id)

    async def aclose(self) -> None:
        await self._inner.aclose()

    def close(self) -> None:
        self._inner.close()

    async def __aenter__(self) -> _Answers:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()


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
    """The SDK's read and write streams of MCP messages over stdin and stdout (see the
    module's documentation)."""
    from mcp.server.stdio import stdio_server  # noqa: PLC0415 imported by the server only, as the SDK itself

    wire = fcntl.fcntl(1, fcntl.F_DUPFD_CLOEXEC, 3)  # taken before the SDK points 1 at stderr
    try:
        pending = _Pending(wire)
        _SERVING[:] = [pending]
        async with stdio_server() as (read_stream, write_stream):
            yield _Requests(read_stream, pending), _Answers(write_stream, pending)
    finally:
        os.close(wire)
