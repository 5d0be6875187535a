"""SIGINT and SIGTERM during a run: kill every child tree, then stop the run where it is.

The first signal kills the process groups snodo started (:func:`snodo.process.runner.terminate_all`:
a test suite, a coder's program) and raises :class:`Interrupted` in the main thread, so the
engine halts the run as ``interrupted``, records what was running and removes its working
copy. A second signal during that clean-up only kills children again: the clean-up is
allowed to finish.
"""

from __future__ import annotations

import contextlib
import signal
import threading
from collections.abc import Iterator
from types import FrameType

from attrs import field

from snodo.attrsbase import define
from snodo.process.runner import live_processes, terminate_all

SIGNALS = (signal.SIGINT, signal.SIGTERM)


class Interrupted(BaseException):
    """The run was asked to stop by a signal. A ``BaseException``, like KeyboardInterrupt,
    so no ``except Exception`` on the way up mistakes it for a fault."""

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
