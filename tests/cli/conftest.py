"""Driving ``snodo`` through a real pseudo-terminal of a given size, read back through a
terminal emulator (pyte), so a test sees exactly the screen a person would see.

``COLUMNS``/``LINES`` are removed from the child's environment: the width must come from
the terminal itself (``TIOCSWINSZ``), as it does for a person.
"""

from __future__ import annotations

import fcntl
import os
import re
import select
import struct
import subprocess
import sys
import termios
import time
from collections.abc import Callable
from pathlib import Path

import pyte
import pytest

from tests.conftest import CliResult, make_repo

ROWS = 2000  # tall enough that nothing scrolls off the emulated screen


class Screen:
    def __init__(self, raw: bytes, cols: int, returncode: int, stderr: str) -> None:
        screen = pyte.Screen(cols, ROWS)
        stream = pyte.ByteStream(screen)
        stream.feed(raw.replace(b"\n", b"\r\n"))  # the pty's onlcr, which raw mode turns off
        self.lines = [line.rstrip() for line in screen.display]
        while self.lines and not self.lines[-1]:
            self.lines.pop()
        self.raw = raw.decode("utf-8", "replace")  # everything written, before the screen settled
        self.cols = cols
        self.returncode = returncode
        self.stderr = stderr

    @property
    def text(self) -> str:
        return "\n".join(self.lines)

    def joined(self) -> str:
        """The screen's content with the wrapping undone: each line stripped of borders and
        the indentation of wrapped cells, then concatenated. A value folded over several
        lines reads whole here; a value that was cut does not."""
        parts = []
        for line in self.lines:
            parts.append(re.sub(r"^[\s│┃║|]+|[\s│┃║|]+$", "", line))
        return "".join(parts)

    def words(self) -> str:
        """The text as words (wrapping at spaces undone): for sentences such as next steps."""
        return " ".join(re.sub(r"[│┃║|]", " ", self.text).split())

    def on_one_line(self, value: str) -> bool:
        return any(value in line for line in self.lines)

    def __repr__(self) -> str:
        return f"<{self.cols} columns, exit {self.returncode}>\n{self.text}\nstderr:\n{self.stderr}"


def _set_size(fd: int, rows: int, cols: int) -> None:
    fcntl.ioctl(fd, termios.TIOCSWINSZ, struct.pack("HHHH", rows, cols, 0, 0))


@pytest.fixture
def in_pty(snodo_home: Path) -> Callable[..., Screen]:
    """Run ``snodo ARGS`` with stdout on a pty of ``cols`` columns (stderr to a pipe unless
    ``stderr_on_tty``), wait for it, return the emulated screen."""

    def run(
        *args: str, cwd: Path, cols: int, stdin: str | None = None, stderr_on_tty: bool = False, timeout: float = 180
    ) -> Screen:
        master, slave = os.openpty()
        _set_size(slave, ROWS, cols)
        env = {k: v for k, v in os.environ.items() if k not in ("COLUMNS", "LINES", "NO_COLOR", "TERM")}
        env.update({"SNODO_HOME": str(snodo_home), "TERM": "xterm-256color"})
        proc = subprocess.Popen(
            [sys.executable, "-m", "snodo", *args],
            cwd=cwd,
            stdin=subprocess.PIPE if stdin is not None else slave,
            stdout=slave,
            stderr=slave if stderr_on_tty else subprocess.PIPE,
            env=env,
            start_new_session=True,
        )
        os.close(slave)
        if stdin is not None:
            assert proc.stdin is not None
            proc.stdin.write(stdin.encode())
            proc.stdin.close()
        raw = bytearray()
        deadline = time.monotonic() + timeout
        while True:
            assert time.monotonic() < deadline, f"snodo {' '.join(args)} did not finish in {timeout}s"
            ready, _, _ = select.select([master], [], [], 0.2)
            if ready:
                try:
                    chunk = os.read(master, 65536)
                except OSError:  # EIO: every writer closed the pty
                    break
                if not chunk:
                    break
                raw += chunk
            elif proc.poll() is not None and not select.select([master], [], [], 0.2)[0]:
                break
        os.close(master)
        err = ""
        if proc.stderr is not None:
            err = proc.stderr.read().decode()
            proc.stderr.close()
        proc.wait(timeout=30)
        return Screen(bytes(raw), cols, proc.returncode, err)

    return run


@pytest.fixture
def project(tmp_path: Path, snodo_cli: Callable[..., CliResult]) -> Path:
    """A committed repository with the solo template's protocol, made by `snodo init`."""
    repo = make_repo(tmp_path / "repo")
    assert snodo_cli("init", "--template", "solo", cwd=repo).returncode == 0
    return repo
