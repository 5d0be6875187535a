"""A confined command's CPU time is snodo's children's time: snodo reaps what it adopted,
even when it exits right after the command (bubblewrap's init outlives its monitor)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

# The confined command spins until it has used this much CPU itself.
BURN = 0.4
CHILD = f"""
import sys
from pathlib import Path
from snodo.proc import run_process
from snodo.sandbox import SandboxPolicy
burn = "import time\\nwhile time.process_time() < {BURN}: pass"
ws = Path(sys.argv[1])
result = run_process(["python3", "-c", burn], cwd=ws, timeout=60, sandbox=SandboxPolicy(workspace=ws))
assert result.returncode == 0, result.output
import resource
own = resource.getrusage(resource.RUSAGE_SELF)
print(own.ru_utime + own.ru_stime)
"""


def test_a_confined_commands_cpu_counts_in_snodos_tree(backend: str, tmp_path: Path) -> None:
    proc = subprocess.Popen(
        [sys.executable, "-I", "-c", CHILD, str(tmp_path)], cwd=tmp_path, stdout=subprocess.PIPE, text=True
    )
    assert proc.stdout is not None
    with proc.stdout:
        own = float(proc.stdout.read().split()[-1])  # snodo's own CPU time, the tree's time less its children's
    _pid, status, usage = os.wait4(proc.pid, 0)
    proc.returncode = os.waitstatus_to_exitcode(status)  # reaped by wait4, which also gives the usage
    assert proc.returncode == 0
    # The burn alone used BURN seconds of CPU in the sandbox: snodo's children's time holds it.
    assert usage.ru_utime + usage.ru_stime - own >= BURN
