"""snodo/workers.py: reused daemon threads for handed-off jobs, and awaiting one from asyncio."""

from __future__ import annotations

import asyncio
import contextvars
import threading

import pytest

from snodo import workers

WHO: contextvars.ContextVar[str] = contextvars.ContextVar("who", default="nobody")


def test_an_idle_thread_of_the_same_name_takes_the_next_job() -> None:
    seen: list[threading.Thread] = []
    for _ in range(3):
        done = threading.Event()
        workers.start(lambda done=done: (seen.append(threading.current_thread()), done.set()), "t-reuse")
        assert done.wait(10)
        deadline = 50
        while deadline and not workers._IDLE.get("t-reuse"):  # back in the idle list
            threading.Event().wait(0.01)
            deadline -= 1
    assert len({id(t) for t in seen}) == 1 and seen[0].name == "t-reuse" and seen[0].daemon


def test_run_returns_raises_sees_the_context_and_a_cancelled_wait_ends_at_once() -> None:
    release = threading.Event()

    async def main() -> None:
        WHO.set("caller")
        assert await workers.run(WHO.get, "t-run") == "caller"
        with pytest.raises(ZeroDivisionError):
            await workers.run(lambda: 1 // 0, "t-run")
        slow = asyncio.ensure_future(workers.run(lambda: release.wait(30), "t-run"))
        await asyncio.sleep(0.05)
        slow.cancel()
        with pytest.raises(asyncio.CancelledError):
            await asyncio.wait_for(slow, 5)

    asyncio.run(main())
    release.set()  # the abandoned job ends on its own; its result goes nowhere
