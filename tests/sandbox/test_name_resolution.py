"""``/etc/resolv.conf`` leading into a hidden shared directory (``/run`` under
systemd-resolved) is reachable in bubblewrap's sandbox through every link on its way, and
nothing else of that directory is: a host socket beside the file stays out of reach."""

from __future__ import annotations

import os
import socket
import subprocess
from pathlib import Path

import pytest

from snodo.sandbox import bwrap
from snodo.sandbox.choose import probe


def test_only_the_file_resolv_conf_leads_to_is_bound_back(tmp_path: Path) -> None:
    if probe("bwrap")[1] is not None:
        pytest.skip("bubblewrap does not work here")
    assert bwrap._in_shared(str(tmp_path)), "the test needs its files in a hidden shared directory (/tmp)"
    run = tmp_path / "run"
    (run / "resolve").mkdir(parents=True)
    (run / "resolve" / "stub-resolv.conf").write_text("nameserver 127.0.0.53\n")
    os.symlink("resolve/stub-resolv.conf", run / "resolv.conf")  # a link in the shared directory too
    os.symlink(run / "resolv.conf", tmp_path / "etc-resolv.conf")
    agent = socket.socket(socket.AF_UNIX)
    agent.bind(str(run / "resolve" / "agent.sock"))
    try:
        ops = bwrap._name_resolution(str(tmp_path / "etc-resolv.conf"))
        assert all(not os.path.isdir(op[-1]) for op in ops), ops  # never a directory
        script = f"cat {tmp_path}/etc-resolv.conf; ls -A {run} {run}/resolve"
        argv = [str(bwrap.bwrap_program()), *bwrap._BASE, "--tmpfs", "/tmp", *(a for op in ops for a in op)]
        done = subprocess.run([*argv, "--", "sh", "-c", script], capture_output=True, text=True, timeout=60)
    finally:
        agent.close()
    assert done.returncode == 0, done.stderr
    assert "nameserver 127.0.0.53" in done.stdout
    assert "agent.sock" not in done.stdout, done.stdout
