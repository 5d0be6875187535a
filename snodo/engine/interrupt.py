"""SIGINT and SIGTERM during a run: the first signal kills every process group snodo started
and raises :class:`Interrupted` in the main thread, so the engine halts the run as
``interrupted``; a second one during that clean-up only kills children again.
"""

from __future__ import annotations

import contextlib
import signal
import threading
from collections.abc import Iterator
from types import FrameType

from attrs import define, field

from snodo.process.runner import live_processes, terminate_all

SIGNALS = (signal.SIGINT, signal.SIGTERM)


class Interrupted(BaseException):
    """A signal stops the run; a ``BaseException``, so no ``except Exception`` takes it for a fault."""

    def __init__(self, signum: int) -> None:
        self.signal_name = signal.Signals(signum).name
        super().__init__(f"interrupted by {self.signal_name}")


@define
class InterruptState:
    signal_name: str | None = None
    #: the child programs that were running when the first signal came
    processes: list[list[str]] = field(factory=list)


@contextlib.contextmanager
def interruptible() -> Iterator[InterruptState]:
    """Install the handlers for the duration of a run (main thread only; elsewhere a no-op)."""
    state = InterruptState()
    if threading.current_thread() is not threading.main_thread():
        yield state
        return

    def handler(signum: int, _frame: FrameType | None) -> None:
        running = [list(argv) for argv in live_processes()]
        terminate_all()
        if state.signal_name is None:
            state.signal_name = signal.Signals(signum).name
            state.processes = running
            raise Interrupted(signum)

    previous = {sig: signal.signal(sig, handler) for sig in SIGNALS}
    try:
        yield state
    finally:
        for sig, old in previous.items():
            signal.signal(sig, old)
