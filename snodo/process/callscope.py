"""Which child processes belong to one MCP tool call (a context variable: its work runs on
threads started with its context), so a cancelled call can kill them and start no more."""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Callable, Iterator
from contextvars import ContextVar

from snodo.base.errors import EnvironmentProblem


class CallScope:
    def __init__(self) -> None:
        self.cancelled = False
        #: Who cancelled: the client, or the server stopping (a signal, the client gone).
        self.reason = ""
        self._lock = threading.Lock()
        self._kills: dict[int, Callable[[], None]] = {}

    def check(self) -> None:
        if self.cancelled:
            raise EnvironmentProblem("the call was cancelled by the client; nothing more was started")

    def add(self, pid: int, kill: Callable[[], None]) -> None:
        with self._lock:
            self._kills[pid] = kill
            cancelled = self.cancelled
        if cancelled:  # cancelled between check() and the start: do not let it run
            kill()

    def discard(self, pid: int) -> None:
        with self._lock:
            self._kills.pop(pid, None)

    def cancel(self, reason: str = "the client cancelled the call") -> int:
        """Kill every child tree of the call now; how many. The first reason stays."""
        with self._lock:
            if not self.cancelled:
                self.reason = reason
            self.cancelled = True
            kills = list(self._kills.values())
        for kill in kills:
            with contextlib.suppress(Exception):
                kill()
        return len(kills)


_CURRENT: ContextVar[CallScope | None] = ContextVar("snodo_call_scope", default=None)


current = _CURRENT.get


@contextlib.contextmanager
def scope(call: CallScope) -> Iterator[CallScope]:
    token = _CURRENT.set(call)
    try:
        yield call
    finally:
        _CURRENT.reset(token)
