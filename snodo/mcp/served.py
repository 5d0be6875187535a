"""What one ``snodo serve`` process serves: the mode's surface at once, and the governance
stack behind its tools (:class:`~snodo.mcp.host.ToolHost`) built once, on first need or by
:meth:`Served.warm` on a thread, so the handshake never waits for it.
"""

from __future__ import annotations

import threading
from typing import TYPE_CHECKING

from snodo.mcp.catalog import build_instructions
from snodo.protocol.capabilities import tools_for

if TYPE_CHECKING:
    from snodo.mcp.host import ToolHost
    from snodo.plugin.host import PluginHost
    from snodo.protocol import LoadedProtocol
    from snodo.protocol.models import Mode


class Served:
    """One mode of one loaded protocol, with its :class:`ToolHost` built on first need."""

    def __init__(self, loaded: LoadedProtocol, plugins: PluginHost, mode: Mode) -> None:
        self.loaded = loaded
        self.plugins = plugins
        self.mode = mode
        self.protocol = loaded.protocol
        self.tools: frozenset[str] = tools_for(mode.tools)
        self._lock = threading.Lock()
        self._host: ToolHost | None = None
        self._warming = False

    @property
    def instructions(self) -> str:
        return build_instructions(self.protocol, self.mode, self.tools)

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
