"""snodo run with ``no_new_privs`` itself (a container started with ``no-new-privileges``,
Kubernetes' ``allowPrivilegeEscalation: false``): every child of snodo has the flag then, so
it no longer tells a confined process from snodo's own children (git above all). Snodo must
neither reap an own child's exit status (a failing git read as success) nor kill it in a
run's sweep, and still kill and reap every orphan of a confined run."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

from orphans import assert_never_ran, escaping_orphan

# Sets no_new_privs, then becomes the script (argv[1]) with the other arguments.
NNP = (
    "import ctypes, os, sys\n"
    "assert ctypes.CDLL(None).prctl(38, 1, 0, 0, 0) == 0\n"
    "os.execv(sys.executable, [sys.executable, '-I', '-c', *sys.argv[1:]])"
)


def _under_nnp(script: str, *args: str, timeout: float = 120) -> str:
    done = subprocess.run(
        [sys.executable, "-I", "-c", NNP, textwrap.dedent(script), *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    return done.stdout


def test_an_own_childs_exit_status_is_not_reaped_away() -> None:
    out = _under_nnp(
        """
        import subprocess, time
        from snodo.sandbox import base
        assert b"NoNewPrivs:\t1" in open("/proc/self/status", "rb").read()
        base.hold_adoption()  # a confined run under way: snodo is the subreaper
        child = subprocess.Popen(["sh", "-c", "exit 3"])
        time.sleep(0.3)  # a zombie by now, with no_new_privs like every child of this process
        print("reaped", base.reap_adopted(()), "status", child.wait())
        """
    )
    assert out.split() == ["reaped", "0", "status", "3"]


def test_a_runs_sweep_kills_its_escaped_orphan_and_spares_an_own_child(backend: str, tmp_path: Path) -> None:
    ws = tmp_path / "ws"
    ws.mkdir()
    escape, landed, token = escaping_orphan(ws, then="import time\ntime.sleep(0.5)\n")
    out = _under_nnp(
        """
        import subprocess, sys, threading, time
        from pathlib import Path
        from snodo.process.runner import run_process
        from snodo.sandbox import SandboxPolicy
        ws = Path(sys.argv[1])
        own = []
        def start_own():  # snodo's own child, started while the confined run goes on
            time.sleep(0.2)
            own.append(subprocess.Popen(["sleep", "30"]))
        starter = threading.Thread(target=start_own)
        starter.start()
        result = run_process([sys.executable, "-c", sys.argv[2]], cwd=ws, timeout=60, sandbox=SandboxPolicy(workspace=ws))
        starter.join()
        print(result.output.strip())
        print("own alive", own[0].poll() is None)
        own[0].terminate()
        print("own status", own[0].wait())
        """,
        str(ws),
        escape,
    )
    assert out.splitlines() == ["parent done", "own alive True", "own status -15"]
    assert_never_ran(landed, token)
