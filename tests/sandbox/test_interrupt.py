"""SIGTERM or Ctrl-C to snodo while a confined test suite runs: nothing it started survives."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.conftest import git, make_repo

pytestmark = pytest.mark.slow

PROTOCOL = """\
protocol_id: t
name: t
modes:
  - mode_id: producer
    tools: [read, validate]
    validators: [suite]
    coder: mock
validators:
  - {validator_id: suite, validator_type: pytest, evaluation_phase: pre_execute, tooling: {timeout: 300}}
"""


#: Start snodo with SIGINT at its default, as a person's ^C finds it: a suite started as a
#: background job (`cmd &` in a script, as CI may) inherits SIGINT ignored, Python then never
#: raises KeyboardInterrupt, and snodo would rightly ignore the signal. The disposition is
#: reset, then snodo is exec'd in the same process (same pid).
SIGINT_AT_DEFAULT = (
    "import os, signal, sys; signal.signal(signal.SIGINT, signal.SIG_DFL); "
    "os.execv(sys.executable, [sys.executable, *sys.argv[1:]])"
)


def _marked(marker: str) -> list[int]:
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            if marker.encode() in (entry / "cmdline").read_bytes():
                state = (entry / "stat").read_text().rsplit(")", 1)[1].split()[0]
                if state != "Z":
                    found.append(int(entry.name))
        except OSError:
            continue
    return found


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGINT])
def test_interrupting_snodo_kills_the_confined_tree(backend: str, signum: int, tmp_path: Path) -> None:
    marker = f"SNODO-INTERRUPT-MARKER-{backend}-{int(signum)}"
    repo = make_repo(tmp_path / "repo")
    (repo / ".snodo").mkdir()
    (repo / ".snodo" / "protocol.yml").write_text(PROTOCOL)
    # The suite starts a detached helper (new session) and then hangs.
    (repo / "test_hang.py").write_text(
        "import subprocess, sys, time\n"
        "def test_hang():\n"
        f"    subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(120)', {marker!r}],"
        " start_new_session=True)\n"
        "    time.sleep(120)\n"
    )
    git(repo, "add", ".")
    git(repo, "commit", "-q", "-m", "p")
    env = {**os.environ, "SNODO_SANDBOX_BACKEND": backend}
    snodo = subprocess.Popen(
        [sys.executable, "-c", SIGINT_AT_DEFAULT, "-m", "snodo", "validate", "a task", "--json"],
        cwd=repo,
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        deadline = time.monotonic() + 60
        while not _marked(marker) and time.monotonic() < deadline:
            time.sleep(0.1)
        assert _marked(marker), "the confined helper never started"
        snodo.send_signal(signum)
        snodo.wait(30)
        time.sleep(0.5)
        assert _marked(marker) == []
    finally:
        snodo.kill()
        snodo.wait()
        for pid in _marked(marker):  # leave nothing behind even when the test fails
            os.kill(pid, signal.SIGKILL)
