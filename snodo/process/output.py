"""A child's output, kept bounded whatever it writes: read in fixed-size chunks, never by line
(one 150 MB line costs a few megabytes), kept as head and tail with a marker saying how
much was cut; lines handed to a callback are cut at :data:`LINE_LIMIT` bytes the same way.
"""

from __future__ import annotations

import contextlib
import math
import os
import select
import subprocess
import time
from collections.abc import Callable, Iterator
from typing import Literal

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
        self.tail = bytearray()  # deleting from its front is cheap
        self.dropped = 0
        self.partial = bytearray()
        self.partial_dropped = 0

    def feed(self, chunk: bytes) -> list[str]:
        """Keep ``chunk``; the complete lines it ends (decoded, bounded)."""
        self.keep(chunk)
        return self._lines(chunk)

    def keep(self, chunk: bytes) -> None:
        room = self.half - len(self.head)
        if room > 0:
            self.head += chunk[:room]
            chunk = chunk[room:]
        self.tail += chunk
        extra = len(self.tail) - self.half
        if extra > 0:
            del self.tail[:extra]
            self.dropped += extra

    def note(self, message: str) -> None:
        """Keep a line of snodo's own (e.g. that a callback failed) in the output."""
        self.keep(f"\n{message}\n".encode())

    def finish(self) -> str | None:
        """The last line when the output did not end with a newline."""
        if not self.partial and not self.partial_dropped:
            return None
        return self._line_done()

    def text(self) -> str:
        head, tail = self.head.decode("utf-8", "replace"), self.tail.decode("utf-8", "replace")
        return f"{head}\n{cut_marker(self.dropped)}\n{tail}" if self.dropped else head + tail

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


class Lines:
    """Keeps each chunk in ``out``; when someone wants lines, hands each complete one to
    ``on_line`` (a failing callback is dropped, the output kept) and ``stop_if``."""

    def __init__(
        self, out: BoundedOutput, on_line: Callable[[str], None] | None, stop_if: Callable[[str], bool] | None
    ) -> None:
        self.out, self.on_line, self.stop_if = out, on_line, stop_if
        self.stopped = False

    def __call__(self, chunk: bytes) -> None:
        if self.on_line is None and self.stop_if is None:
            self.out.keep(chunk)
            return
        for line in self.out.feed(chunk):
            self._line(line)

    def finish(self) -> None:
        last = self.out.finish()
        if last is not None:
            self._line(last)

    def _line(self, line: str) -> None:
        if self.on_line is not None:
            try:
                self.on_line(line)
            except Exception as exc:  # a broken display must not stall the child: keep reading
                self.on_line = None
                self.out.note(
                    f"[snodo: the output callback failed ({type(exc).__name__}: {exc}); "
                    "the output is kept but no longer streamed]"
                )
        if self.stop_if is not None and not self.stopped and self.stop_if(line):
            self.stopped = True


@contextlib.contextmanager
def _exit_watched(proc: subprocess.Popen[bytes], poller: select.poll) -> Iterator[float]:
    """``poller`` also wakes when ``proc`` exits (a pidfd, where the kernel has them); yields
    how long to wait between checks of the time limits (shorter without a pidfd)."""
    try:
        pidfd = os.pidfd_open(proc.pid)
    except (AttributeError, OSError):
        yield 0.005
        return
    try:
        poller.register(pidfd, select.POLLIN)
        yield 0.05
    finally:
        os.close(pidfd)


def collect(
    proc: subprocess.Popen[bytes], take: Lines, *, deadline: float, silence_timeout: float | None
) -> Literal["exited", "timeout", "silent", "stopped"]:
    """Read ``proc``'s output into ``take`` on the calling thread until the process exits,
    its time runs out, it stays silent too long or ``take`` saw the line to stop at. One
    ``poll`` waits for both output and exit."""
    assert proc.stdout is not None
    fd = proc.stdout.fileno()
    poller = select.poll()
    poller.register(fd, select.POLLIN)
    silence = math.inf if silence_timeout is None else silence_timeout
    last = time.monotonic()
    with _exit_watched(proc, poller) as interval:
        while True:
            now = time.monotonic()
            if now >= deadline:
                return "timeout"
            if now - last >= silence:
                return "silent"
            if fd in dict(poller.poll(math.ceil(min(interval, deadline - now) * 1000))):
                chunk = os.read(fd, CHUNK)
                if chunk:
                    take(chunk)
                    last = time.monotonic()
                else:
                    poller.unregister(fd)
            if take.stopped:
                return "stopped"
            if proc.poll() is not None:
                return "exited"


def drain(proc: subprocess.Popen[bytes], take: Lines, seconds: float) -> None:
    """Read what is left of the output once the process tree is dead (at most ``seconds``)."""
    assert proc.stdout is not None
    fd = proc.stdout.fileno()
    poller = select.poll()
    poller.register(fd, select.POLLIN)
    end = time.monotonic() + seconds
    while (left := end - time.monotonic()) > 0 and poller.poll(math.ceil(left * 1000)):
        chunk = os.read(fd, CHUNK)
        if not chunk:
            break
        take(chunk)
    take.finish()
