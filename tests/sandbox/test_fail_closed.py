"""No working backend: a confined call refuses to run (naming what to install), unless the
protocol says ``sandbox: off`` — then it runs unconfined and every run is audited. Bad input
(a sandbox that cannot start, a 10,000-character working directory) gets a clear error."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from snodo.base.errors import EnvironmentProblem
from snodo.process.runner import run_process
from snodo.sandbox import SandboxPolicy, forget_probes
from snodo.sandbox.choose import probe
from tests.conftest import git, make_repo


@pytest.fixture(autouse=True)
def _fresh_probes() -> object:
    forget_probes()
    yield None
    forget_probes()


def _marker_program(ws: Path) -> list[str]:
    return [sys.executable, "-c", "open('ran.txt', 'w').write('ran')"]


def test_a_forced_bwrap_that_cannot_start_fails_closed(tmp_path: Path, fake_bwrap: Path, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    ws = tmp_path / "ws"
    ws.mkdir()
    monkeypatch.setenv("SNODO_BWRAP", str(fake_bwrap))
    monkeypatch.setenv("SNODO_SANDBOX_BACKEND", "bwrap")
    with pytest.raises(EnvironmentProblem) as caught:
        run_process(_marker_program(ws), cwd=ws, timeout=30, sandbox=SandboxPolicy(workspace=ws))
    text = str(caught.value)
    assert "setting up uid map: Permission denied" in text and "bubblewrap" in text and "docs/security.md" in text
    assert not (ws / "ran.txt").exists()


def test_an_unknown_forced_backend_is_refused(tmp_path: Path, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    monkeypatch.setenv("SNODO_SANDBOX_BACKEND", "chroot")
    with pytest.raises(EnvironmentProblem, match="names no sandbox backend"):
        run_process(["true"], cwd=tmp_path, timeout=30, sandbox=SandboxPolicy(workspace=tmp_path))


# Landlock allows at most 16 stacked rulesets per process: a process that already holds 16
# cannot restrict a child any further, so the Landlock backend's probe really fails in it.
# bwrap is the fake that fails like bubblewrap where user namespaces are refused.
NEITHER = textwrap.dedent(
    """
    import ctypes, json, sys
    from pathlib import Path
    libc = ctypes.CDLL(None, use_errno=True)
    libc.syscall.restype = ctypes.c_long
    libc.prctl(38, 1, 0, 0, 0)
    attr = (ctypes.c_uint64 * 1)(1 << 11)  # handle only "make block device"
    for _ in range(16):
        fd = libc.syscall(444, ctypes.byref(attr), ctypes.c_size_t(8), ctypes.c_uint32(0))
        assert fd >= 0 and libc.syscall(446, ctypes.c_int(fd), ctypes.c_uint32(0)) == 0
    from snodo.base.errors import EnvironmentProblem
    from snodo.process.runner import run_process
    from snodo.sandbox import SandboxPolicy
    from snodo.sandbox.choose import statuses
    ws = Path(sys.argv[1])
    out = {"statuses": [[s.name, s.works, s.reason] for s in statuses()]}
    try:
        run_process([sys.executable, "-c", "open('ran.txt', 'w').write('ran')"], cwd=ws, timeout=30,
                    sandbox=SandboxPolicy(workspace=ws))
        out["error"] = None
    except EnvironmentProblem as exc:
        out["error"] = str(exc)
    print(json.dumps(out))
    """
)


def test_with_no_working_backend_a_confined_call_fails_closed(tmp_path: Path, fake_bwrap: Path) -> None:
    ws = tmp_path / "ws"
    ws.mkdir()
    env = {k: v for k, v in os.environ.items() if k != "SNODO_SANDBOX_BACKEND"}
    env["SNODO_BWRAP"] = str(fake_bwrap)
    done = subprocess.run(
        [sys.executable, "-c", NEITHER, str(ws)], capture_output=True, text=True, timeout=120, env=env
    )
    assert done.returncode == 0, done.stderr
    out = json.loads(done.stdout)
    works = {name: ok for name, ok, _ in out["statuses"]}
    assert works == {"bwrap": False, "landlock": False, "seatbelt": False}, out
    assert "no sandbox backend works here" in out["error"]
    assert "uid map" in out["error"] and "Landlock" in out["error"]
    assert "bubblewrap" in out["error"] and "snodo doctor" in out["error"]
    assert not (ws / "ran.txt").exists()


def test_sandbox_off_runs_unconfined_and_reports_each_run(tmp_path: Path, fake_bwrap: Path, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    ws = tmp_path / "ws"
    ws.mkdir()
    monkeypatch.setenv("SNODO_BWRAP", str(fake_bwrap))  # no backend needed when off
    monkeypatch.setenv("SNODO_SANDBOX_BACKEND", "bwrap")
    seen: list[tuple[tuple[str, ...], Path]] = []
    policy = SandboxPolicy(workspace=ws, mode="off", on_unconfined=lambda argv, cwd: seen.append((tuple(argv), cwd)))
    result = run_process(_marker_program(ws), cwd=ws, timeout=30, sandbox=policy)
    assert result.ok and (ws / "ran.txt").read_text() == "ran"
    assert seen == [(tuple(_marker_program(ws)), ws)]


def test_sandbox_off_in_the_protocol_is_audited_per_execution(tmp_path: Path, snodo_cli) -> None:  # type: ignore[no-untyped-def]
    repo = make_repo(tmp_path / "repo")
    (repo / ".snodo").mkdir()
    (repo / ".snodo" / "protocol.yml").write_text(
        "protocol_id: t\nname: t\nmodes:\n  - mode_id: producer\n    tools: [read, validate]\n"
        "    validators: [suite]\n    coder: mock\nvalidators:\n"
        "  - {validator_id: suite, validator_type: pytest, evaluation_phase: pre_execute}\n"
        "execution: {sandbox: 'off'}\n"
    )
    (repo / "test_x.py").write_text("def test_x():\n    assert True\n")
    git(repo, "add", ".")
    git(repo, "commit", "-q", "-m", "p")
    r = snodo_cli("validate", "do a thing", "--json", cwd=repo, env={"SNODO_BWRAP": "/nonexistent/bwrap"})
    assert r.returncode == 0, r
    events = [json.loads(line) for line in (repo / ".git" / "snodo" / "audit.log").read_text().splitlines()]
    unconfined = [e for e in events if e["event"] == "unconfined_execution"]
    assert unconfined, [e["event"] for e in events]
    assert any("pytest" in " ".join(e["data"]["argv"]) for e in unconfined)
    assert all(e["data"]["workspace"] == str(repo) for e in unconfined)


def test_a_ten_thousand_character_working_directory_is_a_clear_error(tmp_path: Path) -> None:
    cwd = tmp_path / ("d" * 10_000)
    for policy in (None, SandboxPolicy(workspace=tmp_path)):
        with pytest.raises(EnvironmentProblem) as caught:
            run_process(["true"], cwd=cwd, timeout=10, sandbox=policy)
        text = str(caught.value)
        assert "working directory" in text and "10" in text and len(text) < 600


def test_a_sandbox_that_cannot_start_for_this_policy_is_a_clear_error(backend: str, tmp_path: Path) -> None:
    """The working directory is inside the hidden home and outside the workspace."""
    from snodo.sandbox.policy import configured_home

    hidden_dir = configured_home() / "sessions"
    hidden_dir.mkdir(parents=True, exist_ok=True)
    ws = tmp_path / "ws"
    ws.mkdir()
    with pytest.raises(EnvironmentProblem) as caught:
        run_process(["true"], cwd=hidden_dir, timeout=30, sandbox=SandboxPolicy(workspace=ws))
    assert "sandbox" in str(caught.value) or "working directory" in str(caught.value)


def test_doctor_names_the_backend_and_why_the_others_fail(snodo_cli, tmp_path: Path, fake_bwrap: Path) -> None:  # type: ignore[no-untyped-def]
    ok = snodo_cli("doctor", "--json", cwd=tmp_path)
    assert ok.returncode == 0, ok
    data = ok.json()
    assert data["backend"] == "bwrap" and data["confined_execution"] is True
    assert [b["name"] for b in data["backends"]] == ["bwrap", "landlock", "seatbelt"]
    forced = snodo_cli("doctor", cwd=tmp_path, env={"SNODO_BWRAP": str(fake_bwrap), "SNODO_SANDBOX_BACKEND": "bwrap"})
    assert forced.returncode == 1
    assert "setting up uid map" in forced.stdout and "landlock" in forced.stdout
    fallback = snodo_cli("doctor", "--json", cwd=tmp_path, env={"SNODO_BWRAP": str(fake_bwrap)}).json()
    assert fallback["backend"] == "landlock"


def test_protocol_check_warns_about_sandbox_off(tmp_path: Path, snodo_cli) -> None:  # type: ignore[no-untyped-def]
    repo = make_repo(tmp_path / "repo")
    (repo / ".snodo").mkdir()
    text = (
        "protocol_id: t\nname: t\nmodes:\n  - mode_id: producer\n    tools: [read, validate]\n"
        "    validators: [suite]\n    coder: mock\nvalidators:\n"
        "  - {validator_id: suite, validator_type: pytest, evaluation_phase: pre_execute}\n"
    )
    (repo / ".snodo" / "protocol.yml").write_text(text)
    quiet = snodo_cli("protocol", "check", cwd=repo)
    assert quiet.returncode == 0 and "sandbox" not in quiet.stderr
    (repo / ".snodo" / "protocol.yml").write_text(text + "execution: {sandbox: 'off'}\n")
    warned = snodo_cli("protocol", "check", cwd=repo)
    assert warned.returncode == 0, warned
    assert "execution.sandbox is 'off'" in warned.stderr and "docs/security.md" in warned.stderr


# Run where no prlimit can be found, so the confined start fails after bubblewrap's seccomp
# descriptor was made: every failed start must give it back.
NO_PRLIMIT = textwrap.dedent(
    """
    import os, sys
    from pathlib import Path
    from snodo.base.errors import EnvironmentProblem
    from snodo.process.runner import run_process
    from snodo.sandbox import SandboxPolicy
    ws = Path(sys.argv[1])
    def fds():
        return len(os.listdir("/proc/self/fd"))
    for attempt in range(4):
        if attempt == 1:
            before = fds()
        try:
            run_process([sys.executable, "-c", "pass"], cwd=ws, timeout=30, sandbox=SandboxPolicy(workspace=ws))
        except EnvironmentProblem as exc:
            assert "prlimit" in str(exc), exc
        else:
            raise AssertionError("started without prlimit")
    print("leaked", fds() - before)
    """
)


def test_a_start_that_fails_after_the_seccomp_descriptor_was_made_closes_it(tmp_path: Path) -> None:
    if probe("bwrap")[1] is not None:
        pytest.skip("bubblewrap does not work here")
    ws = tmp_path / "ws"
    ws.mkdir()
    (tmp_path / "bin").mkdir()
    env = {**os.environ, "PATH": str(tmp_path / "bin"), "SNODO_HOME": str(tmp_path / "home")}
    env["SNODO_SANDBOX_BACKEND"] = "bwrap"
    done = subprocess.run(
        [sys.executable, "-c", NO_PRLIMIT, str(ws)], capture_output=True, text=True, timeout=120, env=env, check=False
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["leaked", "0"], done.stdout
