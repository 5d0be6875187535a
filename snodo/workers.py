"""Reused daemon threads for the short jobs a long-lived process hands off all the time: a
phase's validators (:mod:`snodo.governance.runner`), a server's tool calls
(:mod:`snodo.mcp.server`).

Starting a thread waits until the scheduler has run it, which on a busy machine costs
milliseconds per job; an idle thread of the same name takes the next job instead. Daemon
threads, on purpose: a job that never returns (a hung validator, an abandoned call) keeps
its thread but never keeps the process from exiting.
"""

from __future__ import annotations

import contextlib
import contextvars
import queue
import threading
from collections.abc import Callable
from typing import TYPE_CHECKING, TypeVar

if TYPE_CHECKING:
    import asyncio

_T = TypeVar("_T")
#: Idle threads kept per name.
KEEP_IDLE = 8
_IDLE: dict[str, list[queue.SimpleQueue[Callable[[], None]]]] = {}
_LOCK = threading.Lock()


def _worker(name: str, jobs: queue.SimpleQueue[Callable[[], None]]) -> None:
    while True:
        jobs.get()()
        with _LOCK:
            idle = _IDLE.setdefault(name, [])
            if len(idle) >= KEEP_IDLE:
                return
            idle.append(jobs)


def start(job: Callable[[], None], name: str) -> None:
    """Run ``job`` on an idle thread called ``name``, or a new one. ``job`` handles its own
    exceptions (one that escapes ends its thread)."""
    with _LOCK:
        idle = _IDLE.get(name)
        jobs = idle.pop() if idle else None
    if jobs is None:
        jobs = queue.SimpleQueue()
        threading.Thread(target=_worker, args=(name, jobs), name=name, daemon=True).start()
    jobs.put(job)


async def run(work: Callable[[], _T], name: str) -> _T:
    """``work()`` on a worker thread, in a copy of the caller's context, awaited on the
    running asyncio loop. Cancelling the awaiting task stops the wait at once; the thread
    finishes ``work`` on its own and its result is dropped."""
    import asyncio  # noqa: PLC0415 here: the run path never awaits a worker, and asyncio costs ~20 ms to import

    loop = asyncio.get_running_loop()
    done: asyncio.Future[_T] = loop.create_future()
    context = contextvars.copy_context()

    def settle(result: _T | None, error: BaseException | None) -> None:
        if done.cancelled():
            return
        if error is not None:
            done.set_exception(error)
        else:
            done.set_result(result)  # type: ignore[arg-type]

    def job() -> None:
        try:
            result, error = context.run(work), None
        except BaseException as exc:  # handed to the awaiting task, whatever it is
            result, error = None, exc
        with contextlib.suppress(RuntimeError):  # the loop is closed: nobody waits any more
            loop.call_soon_threadsafe(settle, result, error)

    start(job, name)
    return await done
