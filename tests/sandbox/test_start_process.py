"""``snodo.process.runner.start_process``: a confined child started ahead of its input, with each backend."""

from __future__ import annotations

import sys
import time
from pathlib import Path

from snodo.process.runner import live_processes, start_process
from snodo.sandbox import SandboxPolicy

READS = "import sys\nline = sys.stdin.readline()\nprint('got', line.strip(), flush=True)\n"


def test_a_started_child_gets_its_input_at_finish_and_its_time_limit_counts_from_there(
    tmp_path: Path, backend: str
) -> None:
    started = start_process([sys.executable, "-c", READS], cwd=tmp_path, sandbox=SandboxPolicy(workspace=tmp_path))
    time.sleep(1.5)  # longer than the time limit below: waiting for its input does not count
    assert started.running()
    result = started.finish("hello\n", timeout=1.0)
    assert result.ok and result.output.strip() == "got hello", result
    assert not started.running()
    assert not [a for a in live_processes() if READS in a]


def test_a_discarded_child_is_killed_and_no_longer_live(tmp_path: Path, backend: str) -> None:
    started = start_process([sys.executable, "-c", READS], cwd=tmp_path, sandbox=SandboxPolicy(workspace=tmp_path))
    assert [a for a in live_processes() if READS in a]
    started.discard()
    started.discard()  # twice is harmless
    assert not started.running()
    assert not [a for a in live_processes() if READS in a]
