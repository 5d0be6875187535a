"""bubblewrap's probe is remembered across snodo processes, and only while nothing it
depends on changed; a stale record fails closed (no verdict) and is dropped."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from snodo.sandbox import forget_probes
from snodo.sandbox.bwrap import bwrap_program
from snodo.sandbox.choose import probe

CHILD = """
import sys
from pathlib import Path
from snodo.base.errors import EnvironmentProblem
from snodo.process.runner import run_process
from snodo.sandbox import SandboxPolicy
ws = Path(sys.argv[1])
try:
    result = run_process(["true"], cwd=ws, timeout=30, sandbox=SandboxPolicy(workspace=ws))
    print("exit", result.returncode)
except EnvironmentProblem as exc:
    print("refused", exc.message)
"""


@pytest.fixture
def logging_bwrap(tmp_path: Path) -> Path:
    """The real bubblewrap behind a script that logs each start's last argument (the command)."""
    real = bwrap_program()
    if real is None:
        pytest.skip("no bubblewrap here")
    probe_ok = subprocess.run([real, "--ro-bind", "/", "/", "--unshare-pid", "--", "true"], capture_output=True)
    if probe_ok.returncode != 0:
        pytest.skip("bubblewrap does not work here")
    program = tmp_path / "bin" / "bwrap"
    program.parent.mkdir()
    program.write_text(f'#!/bin/sh\nfor a; do last=$a; done\necho "$last" >> {tmp_path}/starts\nexec {real} "$@"\n')
    program.chmod(0o755)
    return program


def _snodo(tmp_path: Path, program: Path) -> str:
    env = {
        **os.environ,
        "SNODO_HOME": str(tmp_path / "home"),
        "SNODO_BWRAP": str(program),
        "SNODO_SANDBOX_BACKEND": "bwrap",
    }
    workspace = tmp_path / "ws"
    workspace.mkdir(exist_ok=True)
    out = subprocess.run([sys.executable, "-I", "-c", CHILD, str(workspace)], env=env, capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    return out.stdout.strip()


def _starts(tmp_path: Path) -> list[str]:
    return (tmp_path / "starts").read_text().split()


def test_a_second_process_skips_the_probe_until_the_program_changes(tmp_path: Path, logging_bwrap: Path) -> None:
    (tmp_path / "home").mkdir()
    assert _snodo(tmp_path, logging_bwrap) == "exit 0"
    first = _starts(tmp_path)
    assert len(first) == 2 and first[0].endswith("true")  # the probe (`true`), then the command
    record = tmp_path / "home" / "cache" / "sandbox-probe"
    assert json.loads(record.read_text())["program"][0] == str(logging_bwrap)

    assert _snodo(tmp_path, logging_bwrap) == "exit 0"
    assert len(_starts(tmp_path)) == 3  # the command only: the probe was remembered

    logging_bwrap.write_text(logging_bwrap.read_text() + "# changed\n")  # another program now
    assert _snodo(tmp_path, logging_bwrap) == "exit 0"
    assert len(_starts(tmp_path)) == 5  # probed again


def test_a_stale_record_is_no_verdict_and_is_dropped(tmp_path: Path, logging_bwrap: Path) -> None:
    (tmp_path / "home").mkdir()
    assert _snodo(tmp_path, logging_bwrap) == "exit 0"
    record = tmp_path / "home" / "cache" / "sandbox-probe"
    assert record.is_file()
    # The same file (inode, size, mtime) now fails as bubblewrap does where namespaces are refused.
    before = logging_bwrap.stat()
    failing = "#!/bin/sh\necho 'bwrap: setting up uid map: Permission denied' >&2\nexit 1\n"
    text = logging_bwrap.read_text()
    with open(logging_bwrap, "r+") as fh:
        fh.write(failing + "#" * (len(text) - len(failing) - 1) + "\n")
    os.utime(logging_bwrap, ns=(before.st_atime_ns, before.st_mtime_ns))
    assert logging_bwrap.stat().st_size == before.st_size and logging_bwrap.stat().st_ino == before.st_ino

    said = _snodo(tmp_path, logging_bwrap)
    assert said.startswith("refused ") and "the sandbox did not start" in said
    assert not record.exists()
    # The next process probes for real and is refused by the probe itself.
    assert "does not work here" in _snodo(tmp_path, logging_bwrap)


def test_a_missing_program_is_probed_not_taken_as_remembered(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SNODO_HOME", str(tmp_path / "home"))
    monkeypatch.setenv("SNODO_BWRAP", str(tmp_path / "no-such-bwrap"))
    forget_probes()
    try:
        _, reason = probe("bwrap", remembered=True)
    finally:
        forget_probes()
    assert reason == f"{tmp_path / 'no-such-bwrap'} does not exist"
