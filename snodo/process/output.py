"""A child's output, kept bounded whatever it writes.

Output is read in fixed-size chunks, never by line: one 150 MB line with no newline costs
the reader a few megabytes. What is kept is the head and the tail (half of ``limit`` bytes
each) with a visible marker saying how much was cut in between; lines handed to a
callback are cut at :data:`LINE_LIMIT` bytes the same way.
"""

from __future__ import annotations

import collections
import contextlib
import math
import os
import select
import subprocess
import time
from typing import IO, Any, Literal, Protocol

LINE_LIMIT = 64 * 1024
#: Bytes read at a time (never a whole line: lines can be huge).
CHUNK = 64 * 1024


def cut_marker(dropped: int) -> str:
    return f"[… snodo cut {dropped} bytes of output …]"


class BoundedOutput:
    """Collects chunks into a bounded head + tail and splits them into bounded lines."""

    def __init__(self, limit: int) -> None:
        self.half = max(1, limit // 2)
        self.head = bytearray()
        self.tail: collections.deque[bytes] = collections.deque()
        self.tail_size = 0
        self.dropped = 0
        self.partial = bytearray()
        self.partial_dropped = 0

    def feed(self, chunk: bytes) -> list[str]:
        """Keep ``chunk``; the complete lines it ends (decoded, bounded)."""
        self._keep(chunk)
        return self._lines(chunk)

    def keep(self, chunk: bytes) -> None:
        """Keep ``chunk`` when nobody wants it as lines."""
        self._keep(chunk)

    def note(self, message: str) -> None:
        """Keep a line of snodo's own (e.g. that a callback failed) in the output."""
        self._keep(f"\n{message}\n".encode())

    def finish(self) -> str | None:
        """The last line when the output did not end with a newline."""
        if not self.partial and not self.partial_dropped:
            return None
        return self._line_done()

    def text(self) -> str:
        head = self.head.decode("utf-8", "replace")
        if not self.dropped:
            return head + b"".join(self.tail).decode("utf-8", "replace")
        tail = b"".join(self.tail).decode("utf-8", "replace")
        return f"{head}\n{cut_marker(self.dropped)}\n{tail}"

    def _keep(self, chunk: bytes) -> None:
        room = self.half - len(self.head)
        if room > 0:
            self.head += chunk[:room]
            chunk = chunk[room:]
        if not chunk:
            return
        self.tail.append(chunk)
        self.tail_size += len(chunk)
        while self.tail_size - len(self.tail[0]) >= self.half:
            self.tail_size -= len(self.tail[0])
            self.dropped += len(self.tail.popleft())
        if self.tail_size > self.half:  # trim the oldest piece to the bound
            extra = self.tail_size - self.half
            self.tail[0] = self.tail[0][extra:]
            self.tail_size -= extra
            self.dropped += extra

    def _lines(self, chunk: bytes) -> list[str]:
        lines = []
        start = 0
        while (end := chunk.find(b"\n", start)) >= 0:
            self._partial_add(chunk[start:end])
            lines.append(self._line_done())
            start = end + 1
        self._partial_add(chunk[start:])
        return lines

    def _partial_add(self, piece: bytes) -> None:
        room = LINE_LIMIT - len(self.partial)
        self.partial += piece[: max(0, room)]
        self.partial_dropped += max(0, len(piece) - max(0, room))

    def _line_done(self) -> str:
        line = self.partial.decode("utf-8", "replace")
        if self.partial_dropped:
            line += " " + cut_marker(self.partial_dropped)
        self.partial = bytearray()
        self.partial_dropped = 0
        return line


class Child(Protocol):
    """What snodo needs of a started child (a ``Popen``)."""

    pid: int
    returncode: int | Any
    stdout: IO[bytes] | None
    stdin: IO[bytes] | None

    def poll(self) -> int | None: ...

    def wait(self, timeout: float | None = None) -> int: ...


def exit_fd(proc: Child) -> tuple[int, bool]:
    """A descriptor readable once ``proc`` ended, and whether the caller must close it:
    a pidfd (Linux 5.3+), else ``-1``."""
    with contextlib.suppress(AttributeError, OSError):
        return os.pidfd_open(proc.pid), True
    return -1, False


class ExitWatch:
    """Waits for ``proc`` to exit, woken by the kernel (its :func:`exit_fd`); where that
    is missing, by ``Popen.wait``'s polling."""

    def __init__(self, proc: Child) -> None:
        self.proc = proc
        self.poll: select.poll | None = None
        self.fd, self.owned = exit_fd(proc)
        if self.fd >= 0:
            self.poll = select.poll()
            self.poll.register(self.fd, select.POLLIN)

    def __call__(self, seconds: float) -> bool:
        """Whether the process exited (and was reaped) within ``seconds``."""
        if self.poll is None:
            try:
                self.proc.wait(timeout=seconds)
                return True
            except subprocess.TimeoutExpired:
                return False
        if self.proc.poll() is None and not self.poll.poll(int(seconds * 1000)):
            return False
        self.proc.wait()
        return True

    def close(self) -> None:
        if self.fd >= 0 and self.owned:
            os.close(self.fd)
        self.fd = -1


def collect(
    proc: Child, out: BoundedOutput, *, deadline: float, silence_timeout: float | None
) -> Literal["exited", "timeout", "silent"]:
    """Read ``proc``'s output into ``out`` on the calling thread until the process exits (it
    is then reaped), its time runs out or it stays silent too long. One ``poll`` waits for
    both output and exit (a pidfd): no reader thread to start, no second wake-up."""
    assert proc.stdout is not None
    fd = proc.stdout.fileno()
    poller = select.poll()
    poller.register(fd, select.POLLIN)
    pidfd, owned = exit_fd(proc)
    if pidfd >= 0:
        poller.register(pidfd, select.POLLIN)
    last = time.monotonic()
    try:
        while True:
            now = time.monotonic()
            if now >= deadline:
                return "timeout"
            if silence_timeout is not None and now - last >= silence_timeout:
                return "silent"
            wait = min(0.05 if pidfd >= 0 else 0.005, deadline - now)
            for ready, _ in poller.poll(math.ceil(wait * 1000)):
                if ready == fd:
                    chunk = os.read(fd, CHUNK)
                    if chunk:
                        out.keep(chunk)
                        last = time.monotonic()
                    else:
                        poller.unregister(fd)
            if proc.poll() is not None:
                return "exited"
    finally:
        if pidfd >= 0 and owned:
            os.close(pidfd)


def drain(proc: Child, out: BoundedOutput, seconds: float) -> None:
    """Read what is left of the output once the process tree is dead (at most ``seconds``)."""
    assert proc.stdout is not None
    fd = proc.stdout.fileno()
    poller = select.poll()
    poller.register(fd, select.POLLIN)
    end = time.monotonic() + seconds
    while (left := end - time.monotonic()) > 0 and poller.poll(math.ceil(left * 1000)):
        chunk = os.read(fd, CHUNK)
        if not chunk:
            return
        out.keep(chunk)
