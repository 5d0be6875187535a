"""A child's output, bounded whatever it writes: read in chunks (never by line), kept as head and tail
with a marker of how much was cut; lines handed to a callback are cut at :data:`LINE_LIMIT` bytes."""

from __future__ import annotations

import contextlib
import math
import os
import select
import subprocess
import time
from collections.abc import Callable
from typing import Literal

LINE_LIMIT = 64 * 1024
CHUNK = 64 * 1024


def cut_marker(dropped: int) -> str:
    return f"[… snodo cut {dropped} bytes of output …]"


class BoundedOutput:
    """Keeps the chunks as a bounded head and tail; hands ``on_line`` (until it fails) and ``stop_if`` each line."""

    def __init__(
        self, limit: int, on_line: Callable[[str], None] | None, stop_if: Callable[[str], bool] | None
    ) -> None:
        self.half = max(1, limit // 2)
        self.head = bytearray()
        self.tail = bytearray()  # deleting from its front is cheap
        self.dropped = 0
        self.partial = bytearray()
        self.partial_dropped = 0
        self.on_line, self.stop_if = on_line, stop_if
        self.stopped = False

    def __call__(self, chunk: bytes) -> None:
        self.keep(chunk)
        if self.on_line is None and self.stop_if is None:
            return
        *lines, rest = chunk.split(b"\n")
        for line in lines:
            self._partial_add(line)
            self._line()
        self._partial_add(rest)

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

    def finish(self) -> None:
        """The last line, when the output did not end with a newline."""
        if self.partial or self.partial_dropped:
            self._line()

    def text(self) -> str:
        head, tail = self.head.decode("utf-8", "replace"), self.tail.decode("utf-8", "replace")
        return f"{head}\n{cut_marker(self.dropped)}\n{tail}" if self.dropped else head + tail

    def _partial_add(self, piece: bytes) -> None:
        room = LINE_LIMIT - len(self.partial)
        self.partial += piece[: max(0, room)]
        self.partial_dropped += max(0, len(piece) - max(0, room))

    def _line(self) -> None:
        line = self.partial.decode("utf-8", "replace")
        if self.partial_dropped:
            line += " " + cut_marker(self.partial_dropped)
        self.partial = bytearray()
        self.partial_dropped = 0
        if self.on_line is not None:
            try:
                self.on_line(line)
            except Exception as exc:  # a broken display must not stall the child: keep reading
                self.on_line = None
                self.keep(
                    f"\n[snodo: the output callback failed ({type(exc).__name__}: {exc}); "
                    "the output is kept but no longer streamed]\n".encode()
                )
        if self.stop_if is not None and not self.stopped and self.stop_if(line):
            self.stopped = True


def _poller(proc: subprocess.Popen[bytes]) -> tuple[int, select.poll]:
    assert proc.stdout is not None
    poller = select.poll()
    poller.register(proc.stdout.fileno(), select.POLLIN)
    return proc.stdout.fileno(), poller


def collect(
    proc: subprocess.Popen[bytes], take: BoundedOutput, *, deadline: float, silence_timeout: float | None
) -> Literal["exited", "timeout", "silent", "stopped"]:
    """Read ``proc``'s output into ``take`` until it exits, times out, is silent too long or stops."""
    fd, poller = _poller(proc)
    silence = math.inf if silence_timeout is None else silence_timeout
    last, interval = time.monotonic(), 0.005
    with contextlib.ExitStack() as stack:
        with contextlib.suppress(AttributeError, OSError):  # woken when it exits too (a pidfd): wait longer
            pidfd = os.pidfd_open(proc.pid)
            stack.callback(os.close, pidfd)
            poller.register(pidfd, select.POLLIN)
            interval = 0.05
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


def drain(proc: subprocess.Popen[bytes], take: BoundedOutput, seconds: float) -> None:
    """Read what is left of the output once the process tree is dead."""
    fd, poller = _poller(proc)
    end = time.monotonic() + seconds
    while (left := end - time.monotonic()) > 0 and poller.poll(math.ceil(left * 1000)):
        chunk = os.read(fd, CHUNK)
        if not chunk:
            break
        take(chunk)
    take.finish()
