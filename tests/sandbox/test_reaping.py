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

import pytest
from snodo.process.runner import run_process
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


# An orphan of a confined run (``no_new_privs``, adopted by snodo) still burning CPU when
# snodo exits, next to a zombie that is not snodo's to reap (a child some code never waited).
ORPHAN_BURN = 0.25
EXITING = f"""
import ctypes, os, subprocess, sys
from snodo.sandbox import base
base.hold_adoption()  # a confined run under way: snodo is the subreaper
subprocess.Popen(["true"]).pid  # never waited: a zombie, not confined
burn = "import time\\nwhile time.process_time() < {ORPHAN_BURN}: pass"
pid = os.fork()
if pid == 0:  # a confined run's child that double-forked: its orphan is snodo's
    ctypes.CDLL(None).prctl(38, 1, 0, 0, 0)  # PR_SET_NO_NEW_PRIVS
    if os.fork() == 0:
        os.execv(sys.executable, [sys.executable, "-I", "-c", burn])
    os._exit(0)
os.waitpid(pid, 0)
import resource, time
time.sleep(0.05)  # the zombie above has ended by now
own = resource.getrusage(resource.RUSAGE_SELF)
print(own.ru_utime + own.ru_stime)
"""


def test_an_unrelated_zombie_does_not_end_the_wait_at_exit_for_a_confined_orphan(tmp_path: Path) -> None:
    proc = subprocess.Popen([sys.executable, "-I", "-c", EXITING], cwd=tmp_path, stdout=subprocess.PIPE, text=True)
    assert proc.stdout is not None
    with proc.stdout:
        own = float(proc.stdout.read().split()[-1])
    _pid, status, usage = os.wait4(proc.pid, 0)
    proc.returncode = os.waitstatus_to_exitcode(status)
    assert proc.returncode == 0
    # Without the wait the orphan went to the system's init, its CPU time with it.
    assert usage.ru_utime + usage.ru_stime - own >= ORPHAN_BURN


# A program that embeds snodo and adopts orphans itself (the conformance kit counts what a
# plugin left running that way) is still the subreaper after a confined run of snodo's.
EMBEDDING = """
import ctypes, sys
from pathlib import Path
from snodo.process.runner import run_process
from snodo.sandbox import SandboxPolicy
libc = ctypes.CDLL(None)
libc.prctl(36, 1, 0, 0, 0)  # PR_SET_CHILD_SUBREAPER, the embedding program's own
ws = Path(sys.argv[1])
result = run_process(["true"], cwd=ws, timeout=60, sandbox=SandboxPolicy(workspace=ws))
assert result.returncode == 0, result.output
flag = ctypes.c_int(-1)
libc.prctl(37, ctypes.byref(flag), 0, 0, 0)  # PR_GET_CHILD_SUBREAPER
print(flag.value)
"""


def test_a_program_that_adopts_orphans_itself_keeps_doing_so_after_a_confined_run(backend: str, tmp_path: Path) -> None:
    done = subprocess.run(
        [sys.executable, "-I", "-c", EMBEDDING, str(tmp_path)],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.split()[-1] == "1"  # snodo gave up only a flag it had set itself
