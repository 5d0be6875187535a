"""``snodo serve``: one mode's tools over MCP on stdio, with the SDK's low-level server.

Not ``MCPServer``: the listing must be exactly the mode's tools and every other name refused
the same way (audited, in our words), so this module owns ``tools/list`` and ``tools/call``;
the SDK owns the wire (:func:`run_stdio` drains it). ``initialize`` and ``tools/list`` are
answered from the mode's surface (:class:`Served`); the governance stack behind the tools is
built after the handshake, on a thread. Tool work runs on worker threads. A client that goes
away ends the server quietly with status 0; SIGINT and SIGTERM kill the children of the calls
in flight, let those calls record, and exit 0 without waiting for stdin. A server that cannot
start serves only why (:func:`serve_failure`).
"""

from __future__ import annotations

import contextlib
import fcntl
import logging
import os
import select
import signal
import sys
import threading
import time
from collections.abc import Iterator
from types import FrameType
from typing import TYPE_CHECKING, Any

import anyio
from mcp import types
from mcp.server.context import ServerRequestContext
from mcp.server.lowlevel import Server
from mcp.server.stdio import stdio_server
from mcp.shared.exceptions import MCPError

from snodo import __version__
from snodo.base.errors import ProtocolError, SnodoError
from snodo.mcp.catalog import TOOLS, build_instructions
from snodo.mcp.checks import ToolReply
from snodo.process.callscope import CallScope, scope
from snodo.process.runner import terminate_all
from snodo.protocol.capabilities import tools_for

if TYPE_CHECKING:
    from snodo.mcp.host import ToolHost
    from snodo.plugin.host import PluginHost
    from snodo.protocol import LoadedProtocol
    from snodo.protocol.models import Mode

#: How long a stop waits for tool calls in flight to finish once their children are killed.
STOP_GRACE = 10.0
#: How long a stop then waits, at most, for their answers to be written to the client.
ANSWER_GRACE = 2.0

_DISCONNECTS: tuple[type[BaseException], ...] = (
    BrokenPipeError,
    ConnectionResetError,
    EOFError,
    anyio.BrokenResourceError,
    anyio.ClosedResourceError,
)


#: Calls that can run for minutes: progress notifications keep a host that resets its timeout on progress waiting
LONG_CALLS = frozenset({"run_tests", "validate_task"})
#: Seconds between two progress notifications of a long call.
PROGRESS_EVERY = 5.0


async def _report_progress(ctx: Any, name: str) -> None:
    """Tick while a long call works, if the client asked for progress (a ``progressToken``)."""
    meta = getattr(ctx, "meta", None)
    if not isinstance(meta, dict) or meta.get("progress_token") is None:
        return
    ticks = 0
    while True:
        await anyio.sleep(PROGRESS_EVERY)
        ticks += 1
        with contextlib.suppress(Exception):
            await ctx.session.report_progress(ticks, None, f"{name}: still running ({ticks * PROGRESS_EVERY:g} s)")


class Served:
    """One mode of one loaded protocol, with its :class:`ToolHost` built on first need, and
    its tool calls in flight on worker threads, so a stop can cancel them and wait for them."""

    def __init__(self, loaded: LoadedProtocol, plugins: PluginHost, mode: Mode) -> None:
        self.loaded = loaded
        self.plugins = plugins
        self.mode = mode
        self.protocol = loaded.protocol
        self.tools: frozenset[str] = tools_for(mode.tools)
        self._lock = threading.Lock()
        self._host: ToolHost | None = None
        self._warming = False
        self._idle = threading.Condition()
        self._scopes: set[CallScope] = set()

    def host(self) -> ToolHost:
        """The tool host, built by the first caller; a failure to build it is raised to each
        caller in turn: nothing is served half-built."""
        with self._lock:
            if self._host is None:
                from snodo.governance.service import Project  # noqa: PLC0415 the governance stack is built after the handshake, on a thread
                from snodo.mcp.host import ToolHost  # noqa: PLC0415 the governance stack is built after the handshake, on a thread

                self._host = ToolHost(Project(self.loaded, self.plugins, mode=self.mode.mode_id, served=True))
            return self._host

    def warm(self) -> None:
        """Build the host on a thread (once), then start the jobs an earlier server left waiting."""
        with self._lock:
            if self._warming:
                return
            self._warming = True

        def build() -> None:
            try:
                host = self.host()
            except Exception:  # the first tool call builds it again and reports why
                return
            host.start_waiting_jobs()

        threading.Thread(target=build, name="snodo-warm-up", daemon=True).start()

    @contextlib.contextmanager
    def in_flight(self, scope: CallScope) -> Iterator[None]:
        with self._idle:
            self._scopes.add(scope)
        try:
            yield
        finally:
            with self._idle:
                self._scopes.discard(scope)
                self._idle.notify_all()

    def cancel_all(self, reason: str) -> None:
        """Cancel every call in flight (their process trees are killed)."""
        with self._idle:
            scopes = list(self._scopes)
        for each in scopes:
            each.cancel(reason)

    def wait_idle(self, timeout: float) -> bool:
        with self._idle:
            return self._idle.wait_for(lambda: not self._scopes, timeout=timeout)


def build_server(served: Served) -> Server[Any]:
    tools = [
        types.Tool(
            name=name,
            title=TOOLS[name].title,
            description=TOOLS[name].description,
            input_schema=TOOLS[name].input_schema(),
            annotations=types.ToolAnnotations.model_validate(TOOLS[name].annotations(name)),
        )
        for name in sorted(served.tools)
    ]

    async def list_tools(_ctx: Any, _params: types.PaginatedRequestParams | None) -> types.ListToolsResult:
        served.warm()
        return types.ListToolsResult(tools=[t.model_copy(deep=True) for t in tools])

    async def call_tool(ctx: Any, params: types.CallToolRequestParams) -> types.CallToolResult:
        call = CallScope()

        def work() -> ToolReply:
            with served.in_flight(call), scope(call):
                try:
                    host = served.host()
                except Exception as exc:  # fail closed: no host, no tool
                    return ToolReply.error(f"{params.name} refused: snodo could not prepare its tools: {exc}")
                reply = None if call.cancelled else host.call(params.name, params.arguments)
                if reply is not None and not call.cancelled:
                    return reply
                # what its killed processes answered (exit -9) is no result; recorded while the
                # call still counts as in flight: before a stop's serve_stopped
                host.record_cancelled(params.name, call.reason)
                return ToolReply.error(
                    f"{params.name} was cancelled ({call.reason}): its processes were ended and nothing "
                    "it started is still running; its result is not known"
                )

        try:
            # a cancelled call stops waiting and answers nothing (the SDK drops it); its
            # thread ends on its own once call.cancel() has killed what it was waiting for
            async with anyio.create_task_group() as group:
                if params.name in LONG_CALLS:
                    group.start_soon(_report_progress, ctx, params.name)
                reply = await anyio.to_thread.run_sync(work, abandon_on_cancel=True)
                group.cancel_scope.cancel()
        except anyio.get_cancelled_exc_class():
            # notifications/cancelled (or the client gone): kill the call's process tree now
            call.cancel("the client cancelled the call (notifications/cancelled) or went away")
            raise
        return types.CallToolResult(
            content=[types.TextContent(type="text", text=reply.text())],
            structured_content=reply.data if reply.ok else None,
            is_error=not reply.ok,
        )

    mode_id, protocol_id = served.mode.mode_id, served.protocol.protocol_id
    return Server(
        "snodo",
        version=__version__,
        title=f"snodo — mode {mode_id} of {protocol_id}",
        description=f"Governed tools of the mode {mode_id!r} (protocol {protocol_id}).",
        instructions=build_instructions(served.protocol, served.mode, served.tools),
        on_list_tools=list_tools,
        on_call_tool=call_tool,
    )


class _OneLine(logging.Formatter):
    """SDK log records as one line each; a traceback only with ``-v`` (``SNODO_VERBOSE``)."""

    def format(self, record: logging.LogRecord) -> str:
        text = f"snodo serve: {record.levelname.lower()}: {record.getMessage()}"
        if record.exc_info and record.exc_info[1] is not None:
            if os.environ.get("SNODO_VERBOSE"):
                return text + "\n" + self.formatException(record.exc_info)
            exc = record.exc_info[1]
            text += f" ({type(exc).__name__}: {exc})"
        return text


def _configure_logging() -> None:
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(_OneLine())
    for name in ("mcp", "mcp_types"):
        log = logging.getLogger(name)
        log.handlers[:] = [handler]
        log.setLevel(logging.DEBUG if os.environ.get("SNODO_VERBOSE") else logging.WARNING)
        log.propagate = False


def _is_disconnect(exc: BaseException) -> bool:
    if isinstance(exc, BaseExceptionGroup):
        return all(_is_disconnect(e) for e in exc.exceptions)
    return isinstance(exc, _DISCONNECTS)


#: Seconds the end of input waits, at most, for the requests still running to be answered.
DRAIN_LIMIT = 600.0


#: The ids of the requests read from the client and not answered or cancelled yet (one session
#: per process), and a duplicate of the client's end of stdout, only polled.
_PENDING: set[object] = set()
_WIRE = [-1]


def answered(timeout: float) -> None:
    """From any thread: wait up to ``timeout`` seconds until every request read is answered
    or the client stopped reading (its end of stdout closed)."""
    deadline = time.monotonic() + timeout
    poller = select.poll()
    poller.register(_WIRE[0], select.POLLOUT)
    while _PENDING and time.monotonic() < deadline:
        if any(event & (select.POLLERR | select.POLLHUP) for _fd, event in poller.poll(0)):
            return
        time.sleep(0.01)


def run_stdio(server: Server[Any]) -> None:
    """Run ``server`` on the SDK's :func:`~mcp.server.stdio.stdio_server`, which claims
    descriptors 0 and 1 while serving, relayed so that every request read and every answer
    written is noted: the end of input ends the session only once every request read has been
    answered (``printf … | snodo serve`` gets every answer), the client stopped reading, or
    :data:`DRAIN_LIMIT` seconds passed."""

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


#: Seconds after start when the tool host is built even if the client has not listed tools.
WARM_AFTER = 0.5


def serve_stdio(served: Served) -> None:
    """Serve one mode on stdin/stdout until the client leaves."""
    _configure_logging()
    server = build_server(served)
    stopping = _stop_on_signals(served)
    print(
        f"snodo serve: mode {served.mode.mode_id!r} of protocol {served.protocol.protocol_id!r} at "
        f"{served.loaded.root} — {len(served.tools)} tools on stdio",
        file=sys.stderr,
        flush=True,
    )

    # jobs an earlier server left waiting start once the host is built, even if no client lists the tools
    warm_later = threading.Timer(WARM_AFTER, served.warm)
    warm_later.daemon = True
    warm_later.start()
    try:
        run_stdio(server)
    except BaseException as exc:
        if not _is_disconnect(exc):
            raise
    finally:
        warm_later.cancel()
        # stdout to the null device: a flush at exit must not fail on a pipe the client closed
        with contextlib.suppress(OSError, ValueError):
            devnull = os.open(os.devnull, os.O_WRONLY)
            os.dup2(devnull, sys.stdout.fileno())
            os.close(devnull)
    # The client closed our input: the normal end of a stdio server, recorded like a signal.
    served.wait_idle(STOP_GRACE)
    if stopping.is_set():  # a signal stops the server too, and records why
        return
    with contextlib.suppress(Exception):
        served.host().project.record("serve_stopped", reason="end of input")


def _stop_on_signals(served: Served) -> threading.Event:
    """SIGINT/SIGTERM: cancel the calls in flight (their children are killed), let them
    answer, exit 0. The returned event is set once a signal stops the server."""
    stopping = threading.Event()

    def stop(signum: int) -> None:
        served.wait_idle(STOP_GRACE)
        answered(ANSWER_GRACE)  # the cancelled calls' answers reach a host that still reads
        with contextlib.suppress(Exception):
            served.host().project.record("serve_stopped", signal=signal.Signals(signum).name)
        with contextlib.suppress(Exception):
            print(f"snodo serve: stopped by {signal.Signals(signum).name}", file=sys.stderr, flush=True)
        os._exit(0)  # a worker thread may be blocked reading stdin; do not wait for it

    def handler(signum: int, _frame: FrameType | None) -> None:
        served.cancel_all(f"snodo serve was stopped by {signal.Signals(signum).name}")
        terminate_all()
        if not stopping.is_set():
            stopping.set()
            # not a daemon: if input ends meanwhile, exiting waits for this thread to finish
            threading.Thread(target=stop, args=(signum,), name="snodo-serve-stop", daemon=False).start()

    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, handler)
    return stopping


#: The one tool a failed server lists; hosts show it prefixed (``snodo_unavailable``).
UNAVAILABLE = "unavailable"
#: Clients (``clientInfo.name``) that stop on a failed listing and print its error.
STOPS_ON_FAILED_LISTING = frozenset({"codex-mcp-client"})


def serve_failure(exc: SnodoError) -> None:
    """Serve the failure on stdin/stdout until the host leaves, then return (the caller exits non-zero).

    Hosts show little of a server that exits before the handshake, but every host shows a
    server's tools and their results: so the problem and its fix are the instructions, and the
    one tool listed, ``unavailable``, has them as its description and every result; to Codex,
    which shows a failed listing's error but not a tool's result, the listing is that error."""
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
    text = "\n".join(lines)
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
