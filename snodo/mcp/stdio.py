"""The stdio transport of ``snodo serve``, read and written on the event loop.

The SDK's :func:`mcp.server.stdio.stdio_server` reads each line and writes (then flushes)
each message through a worker thread: three thread hops per call, about 0.7 ms of a warm
call's round trip here (issue 26). When stdin and stdout are descriptors the event loop can
wait on (pipes, sockets, terminals: what an MCP host connects), the lines are read and the
messages written by the loop itself, and the SDK's reader and writer tasks get them through
the same streams as before. Anything else (a regular file, ``/dev/null``) is served by the
SDK's transport unchanged.

As with the SDK's, the wire is claimed while serving: the transport reads and writes
private duplicates of descriptors 0 and 1 (close-on-exec), descriptor 0 reads the null
device and descriptor 1 writes to stderr, so no handler and no child process can read a
request or write into the protocol; both are restored at the end. The descriptors stay in
blocking mode (they may be shared, a terminal with a shell above all): a read happens only
once the loop says there is input, a write only one page at a time once there is room.
"""

from __future__ import annotations

import asyncio
import contextlib
import fcntl
import os
import select
import sys
from collections.abc import AsyncIterator
from typing import Any, cast

import anyio

#: At most this much is written at a time: a pipe the loop reports writable has a free page.
_CHUNK = 4096
#: A request line longer than this ends the session: a client cannot make the server hold
#: more of one message in memory.
MAX_LINE = 64 << 20


class _Lines:
    """The lines of ``fd``, each read once the loop reports it readable."""

    def __init__(self, fd: int) -> None:
        self.fd = fd
        self._buffer = bytearray()
        self._end = False

    def __aiter__(self) -> _Lines:
        return self

    async def __anext__(self) -> str:
        while True:
            cut = self._buffer.find(b"\n")
            if cut >= 0:
                line = bytes(self._buffer[: cut + 1])
                del self._buffer[: cut + 1]
                return line.decode("utf-8", "replace")
            if self._end:
                if self._buffer:
                    line = bytes(self._buffer)
                    self._buffer.clear()
                    return line.decode("utf-8", "replace")
                raise StopAsyncIteration
            if len(self._buffer) > MAX_LINE:
                print(f"snodo serve: a message on stdin is longer than {MAX_LINE} bytes; ending", file=sys.stderr)
                raise StopAsyncIteration
            await _ready(self.fd, write=False)
            try:
                data = os.read(self.fd, 1 << 16)
            except BlockingIOError:
                continue
            except OSError:  # a terminal hung up: as the end of input
                data = b""
            if data:
                self._buffer += data
            else:
                self._end = True


class _Writer:
    """Writes to ``fd`` a page at a time, each once the loop reports room for it."""

    def __init__(self, fd: int) -> None:
        self.fd = fd
        self._poll = select.poll()
        self._poll.register(fd, select.POLLOUT)

    async def write(self, text: str) -> None:
        data = memoryview(text.encode("utf-8"))
        while data:
            if not self._poll.poll(0):
                await _ready(self.fd, write=True)
            try:
                written = os.write(self.fd, data[:_CHUNK])
            except BlockingIOError:
                continue
            data = data[written:]

    async def flush(self) -> None:
        """Nothing is buffered."""


async def _ready(fd: int, *, write: bool) -> None:
    loop = asyncio.get_running_loop()
    ready = loop.create_future()

    def wake() -> None:
        if not ready.done():
            ready.set_result(None)

    if write:
        loop.add_writer(fd, wake)
    else:
        loop.add_reader(fd, wake)
    try:
        await ready
    finally:
        if write:
            loop.remove_writer(fd)
        else:
            loop.remove_reader(fd)


def _pollable(fd: int) -> bool:
    """Whether the loop can wait on ``fd`` (epoll refuses regular files and ``/dev/null``)."""
    try:
        poller = select.epoll()
    except (AttributeError, OSError):
        return False
    try:
        poller.register(fd, select.EPOLLIN)
    except OSError:
        return False
    finally:
        poller.close()
    return True


def _on_the_loop() -> bool:
    try:
        loop = asyncio.get_running_loop()
    except RuntimeError:
        return False
    return isinstance(loop, asyncio.SelectorEventLoop) and _pollable(0) and _pollable(1)


@contextlib.asynccontextmanager
async def serve_stdio_streams() -> AsyncIterator[tuple[Any, Any]]:
    """The SDK's read and write streams of MCP messages over stdin and stdout (see the
    module's documentation); the SDK's own transport where the loop cannot wait on them."""
    from mcp.server.stdio import stdio_server  # imported by the server only, as the SDK itself

    if not _on_the_loop():
        async with stdio_server() as streams:
            yield streams
        return
    wire_in = fcntl.fcntl(0, fcntl.F_DUPFD_CLOEXEC, 3)
    wire_out = fcntl.fcntl(1, fcntl.F_DUPFD_CLOEXEC, 3)
    try:
        null = os.open(os.devnull, os.O_RDONLY)
        try:
            os.dup2(null, 0)
        finally:
            os.close(null)
        try:
            os.dup2(2, 1)
        except OSError:  # no stderr: stray output goes nowhere
            sink = os.open(os.devnull, os.O_WRONLY)
            os.dup2(sink, 1)
            os.close(sink)
        stdin, stdout = cast("anyio.AsyncFile[str]", _Lines(wire_in)), cast("anyio.AsyncFile[str]", _Writer(wire_out))
        async with stdio_server(stdin=stdin, stdout=stdout) as streams:
            yield streams
    finally:
        with contextlib.suppress(OSError):
            os.dup2(wire_in, 0)
        with contextlib.suppress(OSError):
            os.dup2(wire_out, 1)
        os.close(wire_in)
        os.close(wire_out)
