"""Which child processes belong to one MCP tool call, so a cancelled call can stop them.

A host that gives up on a call sends ``notifications/cancelled``; the call's work runs on a
worker thread (and its validators on threads of their own, started with the caller's
context), so the call is tracked by a context variable, not by thread. :mod:`snodo.process.runner`
registers every child it starts with the current scope; :meth:`CallScope.cancel` kills
them all at once and makes any later start in the scope fail, so a validator that was
about to begin never does.
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Callable, Iterator
from contextvars import ContextVar

from snodo.base.errors import EnvironmentProblem


class CallScope:
    """The live children of one call; ``cancel`` kills them and refuses new ones."""

    def __init__(self) -> None:
        self.cancelled = False
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

    def cancel(self) -> int:
        """Kill every child tree of the call now; how many there were."""
        with self._lock:
            self.cancelled = True
            kills = list(self._kills.values())
        for kill in kills:
            with contextlib.suppress(Exception):
                kill()
        return len(kills)


_CURRENT: ContextVar[CallScope | None] = ContextVar("snodo_call_scope", default=None)


def current() -> CallScope | None:
    return _CURRENT.get()


@contextlib.contextmanager
def scope(call: CallScope) -> Iterator[CallScope]:
    """Run the body (and the threads it starts with its context) inside ``call``."""
    token = _CURRENT.set(call)
    try:
        yield call
    finally:
        _CURRENT.reset(token)
