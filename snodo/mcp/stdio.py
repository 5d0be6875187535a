"""The stdio transport of ``snodo serve``, read and written on the event loop.

The SDK's :func:`mcp.server.stdio.stdio_server` reads each line and writes (then flushes)
each message through a worker thread: three thread hops per call, about 0.7 ms of a warm
call's round trip here (issue 26). When stdin and stdout are descriptors the event loop can
wait on (pipes, sockets, terminals: what an MCP host connects), the lines are read and the
messages written by the loop itself, and the SDK's reader and writer tasks get them through
the same streams as before. What the loop cannot wait on (a regular file, ``/dev/null``)
is read and written in a worker thread, as the SDK does.

As with the SDK's, the wire is claimed while serving: the transport reads and writes
private duplicates of descriptors 0 and 1 (close-on-exec), descriptor 0 reads the null
device and descriptor 1 writes to stderr, so no handler and no child process can read a
request or write into the protocol; both are restored at the end. The descriptors stay in
blocking mode (they may be shared, a terminal with a shell above all): a read happens only
once the loop says there is input, a write only one page at a time once there is room.

The end of input ends the session only once every request read has been answered (a script
that pipes its requests in, ``printf … | snodo serve``, gets every answer; the SDK would
answer those still running "Connection closed"): until then, or until the client stops
reading (its end of stdout closed), or :data:`DRAIN_LIMIT` seconds.
"""

from __future__ import annotations

import asyncio
import contextlib
import fcntl
import json
import os
import re
import select
import sys
import time
from collections.abc import AsyncIterator
from typing import Any, cast

import anyio

#: At most this much is written at a time: a pipe the loop reports writable has a free page.
_CHUNK = 4096
#: A request line longer than this ends the session: a client cannot make the server hold
#: more of one message in memory.
MAX_LINE = 64 << 20
#: Seconds the end of input waits, at most, for the requests still running to be answered.
DRAIN_LIMIT = 600.0
#: What the SDK writes first in a response: the id, then ``result`` or ``error``.
_ANSWER = re.compile(r'\{"jsonrpc":"2\.0","id":(-?\d+|"(?:[^"\\]|\\.)*"),"(?:result|error)"')


class _Pending:
    """The ids of the requests read from the client and not answered yet. A line counts as a
    request exactly when the SDK's own parser says so (the SDK answers nothing else)."""

    def __init__(self, out_fd: int) -> None:
        from mcp import types  # noqa: PLC0415 the SDK's types only once a message is answered

        self.ids: set[object] = set()
        self.out_fd = out_fd
        self.answered = asyncio.Event()
        self._parse = types.jsonrpc_message_adapter.validate_json
        self._types = types

    def read(self, line: str) -> None:
        if '"id"' not in line and "notifications/cancelled" not in line:
            return  # a notification that cancels nothing: most of those a client sends
        try:
            message = self._parse(line, by_name=False)
        except ValueError:
            return  # the SDK answers no message it cannot parse
        if isinstance(message, self._types.JSONRPCRequest):
            self.ids.add(message.id)
        elif isinstance(message, self._types.JSONRPCNotification) and message.method == "notifications/cancelled":
            params = message.params or {}
            self.ids.discard(params.get("requestId"))  # answered or not, no longer waited for
            self.answered.set()

    def wrote(self, text: str) -> None:
        if not self.ids:
            return
        match = _ANSWER.match(text)
        try:  # the SDK's layout at once; any other (a later SDK) the long way
            message = {"id": json.loads(match.group(1)), "result": None} if match else json.loads(text)
        except ValueError:
            return
        if isinstance(message, dict) and ("result" in message or "error" in message):
            self.ids.discard(message.get("id"))
            self.answered.set()

    def client_reads(self) -> bool:
        """Whether the client still reads stdout (its end not closed)."""
        poller = select.poll()
        poller.register(self.out_fd, select.POLLOUT)
        return not any(event & (select.POLLERR | select.POLLHUP) for _fd, event in poller.poll(0))

    async def drained(self) -> None:
        """Once every request read is answered, the client stopped reading, or time is up."""
        deadline = time.monotonic() + DRAIN_LIMIT
        while self.ids and self.client_reads() and time.monotonic() < deadline:
            self.answered.clear()
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self.answered.wait(), 0.5)


class _Lines:
    """The lines of ``fd``, each read once the loop reports it readable."""

    def __init__(self, fd: int, pending: _Pending, pollable: bool) -> None:
        self.fd = fd
        self.pending = pending
        self.pollable = pollable
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
                return self._read(line)
            if self._end:
                if self._buffer:
                    line = bytes(self._buffer)
                    self._buffer.clear()
                    return self._read(line)
                await self.pending.drained()
                raise StopAsyncIteration
            if len(self._buffer) > MAX_LINE:
                print(f"snodo serve: a message on stdin is longer than {MAX_LINE} bytes; ending", file=sys.stderr)
                raise StopAsyncIteration
            try:
                if self.pollable:
                    await _ready(self.fd, write=False)
                    data = os.read(self.fd, 1 << 16)
                else:  # a regular file, the null device: read in a worker thread
                    data = await anyio.to_thread.run_sync(os.read, self.fd, 1 << 16)
            except BlockingIOError:
                continue
            except OSError:  # a terminal hung up: as the end of input
                data = b""
            if data:
                self._buffer += data
            else:
                self._end = True

    def _read(self, line: bytes) -> str:
        text = line.decode("utf-8", "replace")
        self.pending.read(text)
        return text


class _Writer:
    """Writes to ``fd`` a page at a time, each once the loop reports room for it."""

    def __init__(self, fd: int, pending: _Pending, pollable: bool) -> None:
        self.fd = fd
        self.pending = pending
        self.pollable = pollable
        self._poll = select.poll()
        self._poll.register(fd, select.POLLOUT)

    async def write(self, text: str) -> None:
        data = memoryview(text.encode("utf-8"))
        while data:
            if not self.pollable:  # a regular file, the null device: written in a worker thread
                data = data[await anyio.to_thread.run_sync(os.write, self.fd, data) :]
                continue
            if not self._poll.poll(0):
                await _ready(self.fd, write=True)
            try:
                written = os.write(self.fd, data[:_CHUNK])
            except BlockingIOError:
                continue
            data = data[written:]
        self.pending.wrote(text)  # once it is all out

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


def _selector_loop() -> bool:
    try:
        loop = asyncio.get_running_loop()
    except RuntimeError:
        return False
    return isinstance(loop, asyncio.SelectorEventLoop)


@contextlib.asynccontextmanager
async def serve_stdio_streams() -> AsyncIterator[tuple[Any, Any]]:
    """The SDK's read and write streams of MCP messages over stdin and stdout (see the
    module's documentation)."""
    from mcp.server.stdio import stdio_server  # noqa: PLC0415 imported by the server only, as the SDK itself

    on_the_loop = _selector_loop()
    pollable = on_the_loop and _pollable(0), on_the_loop and _pollable(1)
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
        pending = _Pending(wire_out)
        stdin = cast("anyio.AsyncFile[str]", _Lines(wire_in, pending, pollable[0]))
        stdout = cast("anyio.AsyncFile[str]", _Writer(wire_out, pending, pollable[1]))
        async with stdio_server(stdin=stdin, stdout=stdout) as streams:
            yield streams
    finally:
        with contextlib.suppress(OSError):
            os.dup2(wire_in, 0)
        with contextlib.suppress(OSError):
            os.dup2(wire_out, 1)
        os.close(wire_in)
        os.close(wire_out)
