"""Test harness: a real MCP client (the official SDK's ``stdio_client`` + ``ClientSession``) driving
``python -m snodo serve`` in a subprocess, usable from synchronous tests.

The client lives in an anyio event loop on a portal thread, so a test calls tools as plain
functions while the transport, the protocol negotiation and the server process are exactly
what an agent host would run. Servers are started per module where the tests can share
one (start-up costs a second or two).

No ``__init__.py`` in this directory: a package named ``mcp`` would shadow the SDK.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from anyio.from_thread import BlockingPortal, start_blocking_portal
from mcp import types
from mcp.client.session import ClientSession
from mcp.client.stdio import StdioServerParameters, stdio_client

from snodo.state.audit import AuditLog

SERVE_TIMEOUT = 60.0


def git(cwd: Path, *args: str) -> str:
    return subprocess.run(["git", "-C", str(cwd), *args], check=True, capture_output=True, text=True).stdout


def make_project(
    root: Path, protocol: str | None = None, *, template: str | None = None, home: Path | None = None
) -> Path:
    """A git repository with one commit and ``.snodo/protocol.yml`` (given text or a template)."""
    root.mkdir(parents=True, exist_ok=True)
    git(root, "init", "-q", "-b", "main")
    git(root, "config", "user.email", "dev@example.com")
    git(root, "config", "user.name", "Dev")
    (root / "README.md").write_text("# project\n")
    git(root, "add", "README.md")
    git(root, "commit", "-q", "-m", "initial")
    if template is not None:
        snodo(root, home or root, "init", "--template", template, check=True)
    if protocol is not None:
        (root / ".snodo").mkdir(exist_ok=True)
        (root / ".snodo" / "protocol.yml").write_text(protocol)
    return root


def server_env(home: Path) -> dict[str, str]:
    return {
        "SNODO_HOME": str(home),
        "LITELLM_LOCAL_MODEL_COST_MAP": "True",
        "PYTHONDONTWRITEBYTECODE": "1",
        "COLUMNS": "200",
    }


def snodo(
    cwd: Path, home: Path, *args: str, check: bool = False, timeout: float = 120, stdin: str | None = None
) -> subprocess.CompletedProcess[str]:
    """Run the ``snodo`` command line as a subprocess (``python -m snodo``)."""
    proc = subprocess.run(
        [sys.executable, "-m", "snodo", *args],
        cwd=cwd,
        capture_output=True,
        text=True,
        input=stdin,
        timeout=timeout,
        env={**os.environ, **server_env(home)},
    )
    if check and proc.returncode != 0:
        raise AssertionError(f"snodo {' '.join(args)} exited {proc.returncode}:\n{proc.stdout}\n{proc.stderr}")
    return proc


class Served:
    """One connected client session; every method blocks until the server answered."""

    def __init__(self, portal: BlockingPortal, session: ClientSession, root: Path, stderr: Path) -> None:
        self.portal = portal
        self.session = session
        self.root = root
        self.stderr_path = stderr

    @property
    def instructions(self) -> str:
        return self.session.instructions or ""

    @property
    def protocol_version(self) -> str | None:
        return self.session.protocol_version

    def list_tools(self) -> list[types.Tool]:
        return list(self.portal.call(self.session.list_tools).tools)

    def tool_names(self) -> set[str]:
        return {t.name for t in self.list_tools()}

    def call(self, name: str, arguments: dict[str, Any] | None = None) -> types.CallToolResult:
        result = self.portal.call(self.session.call_tool, name, arguments or {})
        assert isinstance(result, types.CallToolResult)
        return result

    def ok(self, name: str, arguments: dict[str, Any] | None = None) -> dict[str, Any]:
        """Call a tool that must succeed; its JSON reply."""
        result = self.call(name, arguments)
        text = result.content[0].text if result.content and isinstance(result.content[0], types.TextContent) else ""
        assert not result.is_error, f"{name} failed: {text}"
        data = json.loads(text)
        assert result.structured_content == data
        return data

    def refused(self, name: str, arguments: dict[str, Any] | None = None) -> str:
        """Call a tool that must be refused; the error text."""
        result = self.call(name, arguments)
        assert result.is_error, f"{name} was not refused: {result.content}"
        assert result.content and isinstance(result.content[0], types.TextContent)
        return result.content[0].text

    def stderr(self) -> str:
        return self.stderr_path.read_text() if self.stderr_path.exists() else ""


@contextmanager
def serve(
    root: Path,
    home: Path,
    *args: str,
    era: str = "legacy",
    stderr: Path | None = None,
    version: str | None = None,
    env: dict[str, str] | None = None,
    client: str | None = None,
) -> Iterator[Served]:
    """Start ``snodo serve ARGS`` in ``root`` and connect a real SDK client to it.

    ``client``: the name the client introduces itself with (``clientInfo.name``), as a host does.

    ``era``: ``legacy`` (the initialize handshake, optionally at an older ``version``) or
    ``modern`` (the 2026-07-28 ``server/discover`` probe and per-request envelope).
    """
    errlog = stderr or root.parent / f"serve-{os.getpid()}-{id(root)}.stderr"
    params = StdioServerParameters(
        command=sys.executable,
        args=["-m", "snodo", "serve", *args],
        cwd=str(root),
        env={**server_env(home), **(env or {})},
    )
    with (
        open(errlog, "w") as err,
        start_blocking_portal() as portal,
        portal.wrap_async_context_manager(stdio_client(params, errlog=err)) as (read, write),
    ):
        info = types.Implementation(name=client, version="0") if client else None
        session = ClientSession(read, write, read_timeout_seconds=SERVE_TIMEOUT, client_info=info)
        with portal.wrap_async_context_manager(session):
            if era == "modern":
                portal.call(session.discover)
            elif version is not None:
                portal.call(_initialize_at, session, version)
            else:
                portal.call(session.initialize)
            yield Served(portal, session, root, errlog)


async def _initialize_at(session: ClientSession, version: str) -> None:
    """The handshake at an older protocol version, as a client of that era would send it."""
    result = await session.send_request(
        types.InitializeRequest(
            params=types.InitializeRequestParams(
                protocol_version=version,
                capabilities=types.ClientCapabilities(),
                client_info=types.Implementation(name="old-client", version="0.1"),
            )
        ),
        types.InitializeResult,
    )
    assert result.protocol_version == version
    session.adopt(result)
    await session.send_notification(types.InitializedNotification())


def runtime_state(root: Path) -> Path:
    """Where the project at ``root`` keeps its runtime state (snodo.state.runtime), asked of git:
    ``<common git dir>/snodo``, or ``…/snodo/projects/<path>`` for a project below the top."""
    top = Path(git(root, "rev-parse", "--show-toplevel").strip()).resolve()
    common = Path(git(root, "rev-parse", "--path-format=absolute", "--git-common-dir").strip())
    below = root.resolve().relative_to(top)
    return common / "snodo" if below == Path(".") else common / "snodo" / "projects" / below


def audit(root: Path, event: str | None = None) -> list[dict[str, Any]]:
    log = runtime_state(root) / "audit.log"
    return AuditLog(log).records(event) if log.parent.is_dir() else []
