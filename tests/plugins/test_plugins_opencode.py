"""The opencode coder against a fake ``opencode`` executable first on PATH, whose behaviour
``FAKE_OPENCODE`` picks: it edits the tree, hangs (with a child), goes silent, crashes, or
touches ``.snodo/`` (reported, not hidden: the engine's snapshot is what catches it)."""

from __future__ import annotations

import json
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from snodo.api import CoderRequest, CoderResult, EnvironmentProblem
from snodo.plugins import PluginHost

FAKE = """#!{python}
import json, os, subprocess, sys, time
from pathlib import Path

behaviour = os.environ.get("FAKE_OPENCODE", "good")
Path(os.environ["FAKE_OPENCODE_RECORD"]).write_text(json.dumps({{"argv": sys.argv[1:], "cwd": os.getcwd()}}))
if behaviour == "good":
    Path("hello.py").write_text("def hello():\\n    return 'hi'\\n")
    print("edited hello.py", flush=True)
elif behaviour == "hang":
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(120)"])
    Path(os.environ["FAKE_OPENCODE_PIDS"]).write_text(f"{{os.getpid()}} {{child.pid}}")
    while True:
        print("thinking...", flush=True)
        time.sleep(0.2)
elif behaviour == "silent":
    print("starting", flush=True)
    time.sleep(120)
elif behaviour == "crash":
    print("loading model", flush=True)
    print("fatal: provider refused the request", flush=True)
    sys.exit(3)
elif behaviour == "snodo":
    Path(".snodo").mkdir(exist_ok=True)
    Path(".snodo/protocol.yml").write_text("protocol_id: hijacked\\n")
    print("adjusted the protocol", flush=True)
"""


@pytest.fixture
def fake_opencode(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Callable[[str], Path]:
    """Install the fake first on PATH; returns a setter for its behaviour giving the record file."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    exe = bin_dir / "opencode"
    exe.write_text(FAKE.format(python=sys.executable))
    exe.chmod(0o755)
    monkeypatch.setenv("PATH", f"{bin_dir}:/usr/bin:/bin")
    record = tmp_path / "record.json"
    monkeypatch.setenv("FAKE_OPENCODE_RECORD", str(record))
    monkeypatch.setenv("FAKE_OPENCODE_PIDS", str(tmp_path / "pids"))

    def behave(behaviour: str) -> Path:
        monkeypatch.setenv("FAKE_OPENCODE", behaviour)
        return record

    return behave


def run(host: PluginHost, workspace: Path, config: dict[str, Any], log: list[str] | None = None) -> CoderResult:
    coder = host.coder("opencode").factory(config)
    request = CoderRequest(
        task_id="t1",
        spec="add a hello module",
        workspace=workspace,
        mode_id="dev",
        protected_paths=("secrets/**",),
        findings=("tests failed",),
        attempt=1,
        log=(log.append if log is not None else lambda _line: None),
        timeout=30,
    )
    return coder.generate(request)


def test_good_run_edits_the_tree_and_streams_output(
    host: PluginHost, project: Callable[..., Path], fake_opencode: Callable[[str], Path]
) -> None:
    record = fake_opencode("good")
    root = project({"README.md": "# demo\n"})
    log: list[str] = []
    result = run(host, root, {"model": "anthropic/claude", "extra_args": ["--agent", "build"]}, log)
    assert result.operations == ()
    assert (root / "hello.py").read_text().startswith("def hello")
    assert log == ["edited hello.py"]
    seen = json.loads(record.read_text())
    assert Path(seen["cwd"]).resolve() == root.resolve()
    argv = seen["argv"]
    assert argv[:5] == ["run", "--model", "anthropic/claude", "--agent", "build"]
    prompt = argv[5]
    assert "add a hello module" in prompt and "tests failed" in prompt
    assert ".snodo/" in prompt and "secrets/**" in prompt


def test_missing_binary_names_the_install_hint(
    host: PluginHost, project: Callable[..., Path], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    empty = tmp_path / "empty-bin"
    empty.mkdir()
    monkeypatch.setenv("PATH", str(empty))
    with pytest.raises(EnvironmentProblem) as caught:
        run(host, project({}), {})
    assert "npm install -g opencode-ai" in str(caught.value)
    assert "opencode" in caught.value.message


def test_timeout_kills_the_whole_process_group(
    host: PluginHost,
    project: Callable[..., Path],
    tmp_path: Path,
    fake_opencode: Callable[[str], Path],
    is_alive: Callable[[int], bool],
) -> None:
    fake_opencode("hang")
    started = time.monotonic()
    with pytest.raises(EnvironmentProblem, match=r"timed out after 1\.5s"):
        run(host, project({}), {"timeout": 1.5})
    assert time.monotonic() - started < 10
    pids = [int(p) for p in (tmp_path / "pids").read_text().split()]
    deadline = time.monotonic() + 5
    while any(is_alive(p) for p in pids) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not [p for p in pids if is_alive(p)], "the fake or the child it spawned survived the timeout"


def test_silence_timeout(host: PluginHost, project: Callable[..., Path], fake_opencode: Callable[[str], Path]) -> None:
    fake_opencode("silent")
    with pytest.raises(EnvironmentProblem, match=r"timed out after 0.5s without output"):
        run(host, project({}), {"silence_timeout": 0.5})


def test_crash_reports_exit_code_and_output_tail(
    host: PluginHost, project: Callable[..., Path], fake_opencode: Callable[[str], Path]
) -> None:
    fake_opencode("crash")
    with pytest.raises(EnvironmentProblem) as caught:
        run(host, project({}), {})
    assert "exited with code 3" in caught.value.message
    assert "provider refused the request" in caught.value.message


def test_touching_snodo_is_not_hidden(
    host: PluginHost, project: Callable[..., Path], fake_opencode: Callable[[str], Path]
) -> None:
    fake_opencode("snodo")
    root = project({".snodo/protocol.yml": "protocol_id: real\n"})
    result = run(host, root, {})
    assert (root / ".snodo/protocol.yml").read_text() == "protocol_id: hijacked\n"
    assert "adjusted the protocol" in result.summary
