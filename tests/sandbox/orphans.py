"""A confined command whose grandchild tries to outlive the run: double fork, a new session,
an empty environment, then a payload 2 s later. Shared by the tests that check it never runs."""

from __future__ import annotations

import os
import secrets
import textwrap
import time
from pathlib import Path


def escaping_orphan(ws: Path, then: str = "") -> tuple[str, Path, str]:
    """The command's Python code (it prints ``parent done``, then runs ``then``), the file
    the payload would write, and the token in the payload's command line."""
    token = secrets.token_hex(8)
    landed = ws / "payload-ran"
    payload = f"import time; time.sleep(2); open({str(landed)!r}, 'w').write('{token}')"
    code = textwrap.dedent(
        f"""
        import os, sys
        if os.fork() == 0:
            os.setsid()
            if os.fork() == 0:
                os.execve(sys.executable, [sys.executable, "-c", {payload!r}], {{}})
            os._exit(0)
        os.wait()
        print("parent done")
        """
    )
    return code + textwrap.dedent(then), landed, token


def assert_never_ran(landed: Path, token: str) -> None:
    """Once the payload's time has passed: it did not run, and no process of it is alive."""
    time.sleep(3)
    assert not landed.exists(), "a process of the run outlived it and ran its payload"
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            cmdline = Path(f"/proc/{pid}/cmdline").read_bytes()
        except OSError:
            continue
        assert token.encode() not in cmdline, f"process {pid} of the run is still alive"
