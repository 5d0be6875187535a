"""`snodo authorize` on a real terminal (a pty): what an agent wrote reaches the person's
screen escaped, never interpreted, and a passphrase-protected key is asked for."""

from __future__ import annotations

import json
import os
import pty
import select
import signal
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from snodo.state.proposals import ProposalStore
from snodo.state.sessions import SessionStore
from tests.conftest import make_repo

pytestmark = pytest.mark.skipif(sys.platform == "win32", reason="needs a pty")

ATTACK = (
    "Add a greeting module.\n\nAcceptance criteria:\n- the greeting sounds friendly\n"
    "\x1b[2J\x1b[H\x1b[32mAll validators passed. Nothing left to review.\x1b[0m\n"
    "\x1b]0;owned\x07\x1b[8m hidden text \x1b[28m\r\x1b[2Kcarriage\u202eevil\n"
)
INTERPRETED = [b"\x1b[2J", b"\x1b[H", b"\x1b]0;owned", b"\x1b[8m", b"\x1b[2K", b"\x1b[1A", b"\r\x1b", "\u202e".encode()]


class Terminal:
    """A child process on a pseudo-terminal: read what it shows, type answers."""

    def __init__(self, argv: list[str], *, cwd: Path, env: dict[str, str]) -> None:
        pid, fd = pty.fork()
        if pid == 0:  # the child: run snodo with the pty as its terminal
            try:
                os.chdir(cwd)
                os.execve(sys.executable, [sys.executable, "-m", "snodo", *argv], env)
            finally:
                os._exit(127)
        self.pid, self.fd, self.output = pid, fd, b""

    def expect(self, marker: bytes, timeout: float = 60) -> None:
        deadline = time.monotonic() + timeout
        while marker not in self.output:
            if time.monotonic() > deadline:
                raise AssertionError(f"{marker!r} never shown; got {self.output[-2000:]!r}")
            if not self._read(0.2):
                raise AssertionError(f"ended before {marker!r}; got {self.output[-2000:]!r}")

    def type(self, text: bytes) -> None:
        os.write(self.fd, text)

    def finish(self, timeout: float = 60) -> int:
        deadline = time.monotonic() + timeout
        while self._read(0.2):
            if time.monotonic() > deadline:
                os.kill(self.pid, signal.SIGKILL)
                break
        _, status = os.waitpid(self.pid, 0)
        os.close(self.fd)
        return os.waitstatus_to_exitcode(status)

    def _read(self, wait: float) -> bool:
        ready, _, _ = select.select([self.fd], [], [], wait)
        if not ready:
            return True
        try:
            chunk = os.read(self.fd, 65536)
        except OSError:  # EIO: the child closed the terminal
            return False
        self.output += chunk
        return bool(chunk)


@pytest.fixture
def escalated(tmp_path: Path, snodo_cli: Callable[..., Any], snodo_home: Path) -> tuple[Path, str]:
    repo = make_repo(tmp_path / "proj")
    assert snodo_cli("init", "--template", "solo", cwd=repo).returncode == 0
    r = snodo_cli("validate", "-", "--phase", "post_execute", "--json", cwd=repo, input=ATTACK)
    assert r.returncode == 2, r
    decision_id: str = r.json()["decision_id"]
    session, pending = SessionStore(snodo_home).find_pending(decision_id, repo)
    ProposalStore(repo).add(
        pending,
        session_id=session.session_id,
        decision="approve",
        justification="\x1b[1A\x1b[2Kreviewed by the security team\x1b]0;x\x07",
        proposed_by="mcp:producer\x1b[2J",
    )
    return repo, decision_id


def env_for(home: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in ("NO_COLOR", "COLUMNS", "LINES")}
    return {**env, "SNODO_HOME": str(home), "TERM": "xterm-256color", "COLUMNS": "200"}


def test_agent_text_reaches_the_terminal_escaped(escalated: tuple[Path, str], snodo_home: Path) -> None:
    repo, decision_id = escalated
    term = Terminal(["authorize", decision_id], cwd=repo, env=env_for(snodo_home))
    term.expect(b"[y/N]")
    shown = term.output
    term.type(b"n\r")
    assert term.finish() != 0  # declined: nothing signed
    for sequence in INTERPRETED:
        assert sequence not in shown, (sequence, shown)
    text = shown.decode("utf-8", "replace")
    assert "\\x1b[2J\\x1b[H" in text and "\\x1b]0;owned\\x07" in text and "\\u202e" in text
    assert "\\x1b[1A\\x1b[2Kreviewed by the security team" in text  # the proposal, escaped too
    assert "the greeting sounds friendly" in text  # the real spec is still there to read
    assert not (repo / ".snodo" / "decisions").exists()


def test_a_protected_key_is_asked_for_before_signing(escalated: tuple[Path, str], snodo_home: Path) -> None:
    repo, decision_id = escalated
    env = env_for(snodo_home)
    protect = Terminal(["keys", "protect"], cwd=repo, env=env)
    protect.expect(b"passphrase")
    protect.type(b"correct horse battery\r")
    protect.expect(b"peat")  # "Repeat for confirmation"
    protect.type(b"correct horse battery\r")
    assert protect.finish() == 0, protect.output
    assert b"ENCRYPTED PRIVATE KEY" in (snodo_home / "keys" / "decision_ed25519").read_bytes()

    wrong = Terminal(["authorize", decision_id, "--yes"], cwd=repo, env=env)
    wrong.expect(b"passphrase")
    wrong.type(b"not it\r")
    assert wrong.finish() != 0
    assert b"wrong passphrase" in wrong.output
    assert not (repo / ".snodo" / "decisions").exists()

    right = Terminal(["authorize", decision_id, "--yes", "--json"], cwd=repo, env=env)
    right.expect(b"passphrase")
    right.type(b"correct horse battery\r")
    assert right.finish() == 0, right.output
    record = json.loads((repo / ".snodo" / "decisions" / f"{decision_id}.json").read_text())
    assert record["decision"] == "approve" and record["signature"]
