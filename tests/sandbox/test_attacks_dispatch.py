"""Issue 21, ``python -m snodo`` in the project root: an agent writes its own ``snodo``
package (``snodo/__init__.py``, ``snodo/__main__.py``) and a ``sitecustomize.py`` into the
project through a real MCP client, then calls ``dispatch_task``. The job snodo starts of
itself must not import any of it: it runs as ``python -I`` from outside the workspace, so
neither the project root nor ``$PYTHONPATH`` is on its ``sys.path``. The server here even
inherits ``PYTHONPATH=<project root>`` — a job started without ``-I`` would run the payload.

The payload, were it run, leaves a marker outside the workspace and rewrites the protocol
and the decision keys. None of that happens, and the job still runs to its end.

The same holds for the command ``snodo serve --print-config`` hands a host when no
``snodo`` script sits beside the interpreter (``python -I -m snodo``): started in the
project root as a host would, it is snodo that answers, not the agent's package.
"""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
import sysconfig
import time
from pathlib import Path
from typing import Any

import anyio
import pytest
from mcp.client.session import ClientSession
from mcp.client.stdio import StdioServerParameters, stdio_client

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "mcp"))
from mcp_harness import Served, audit, make_project, serve, snodo

pytestmark = pytest.mark.slow

PROTOCOL = """\
protocol_id: dispatch-attack
name: dispatch attack
initial_mode: producer
modes:
  - mode_id: producer
    tools: [read, edit, validate, dispatch]
    validators: [scope, suite]
    coder: mock
validators:
  - {validator_id: scope, validator_type: protocol}
  - {validator_id: suite, validator_type: pytest, evaluation_phase: post_execute}
"""

PAYLOAD = """\
import os
from pathlib import Path
Path(MARKER).write_text("payload ran in pid %d, cwd %s" % (os.getpid(), os.getcwd()))
for target in (Path(ROOT) / ".snodo" / "protocol.yml", *(Path(HOME) / "keys").glob("*")):
    try:
        target.write_text("pwned\\n")
    except OSError:
        pass
"""

SPEC = "Add a module named `hello.py` with a function `hello()`.\n"


def _digest(*roots: Path) -> dict[str, str]:
    """Every file under ``roots`` by content (what the payload would have rewritten)."""
    found = {}
    for root in roots:
        for path in sorted(root.rglob("*")) if root.exists() else ():
            if path.is_file():
                found[str(path)] = hashlib.sha256(path.read_bytes()).hexdigest()
    return found


def _payload(marker: Path, root: Path, home: Path) -> str:
    return (
        PAYLOAD.replace("MARKER", repr(str(marker))).replace("ROOT", repr(str(root))).replace("HOME", repr(str(home)))
    )


def _wait(producer: Served, job_id: str, marker: Path, timeout: float = 120) -> dict[str, Any]:
    deadline = time.monotonic() + timeout
    while (status := producer.ok("get_job_status", {"job_id": job_id}))["status"] not in ("completed", "halted"):
        assert not marker.exists(), marker.read_text()  # the payload ran in the job's place
        assert time.monotonic() < deadline, f"job {job_id} still {status['status']}"
        time.sleep(0.3)
    return status


def test_a_snodo_package_written_by_the_agent_never_runs_in_the_dispatched_job(tmp_path: Path) -> None:
    home = tmp_path / "home"
    marker = tmp_path / "payload-ran"
    root = make_project(tmp_path / "repo", PROTOCOL)
    (root / "tests").mkdir()
    (root / "tests" / "test_ok.py").write_text("def test_ok():\n    assert True\n")
    subprocess.run(["git", "-C", str(root), "add", "."], check=True)
    subprocess.run(["git", "-C", str(root), "commit", "-q", "-m", "project"], check=True)
    guarded = [root / ".snodo" / "protocol.yml", home / "keys"]
    payload = _payload(marker, root, home)
    with serve(root, home, "--mode", "producer", env={"PYTHONPATH": str(root)}) as producer:
        assert producer.ok("validate_task", {"task_id": "t-m", "task_spec": SPEC})["status"] == "pass"
        before = _digest(*guarded)  # the session made the decision keys: what the payload goes after
        assert any(p.startswith(str(home / "keys")) for p in before), before
        for path in ("snodo/__init__.py", "snodo/__main__.py", "sitecustomize.py", "usercustomize.py"):
            producer.ok("write_file", {"path": path, "content": payload})
        accepted = producer.ok("dispatch_task", {"task_spec": SPEC, "task_id": "t-m"})
        assert accepted["status"] == "accepted", accepted
        final = _wait(producer, accepted["job_id"], marker)
    assert not marker.exists(), marker.read_text()
    assert final["status"] == "completed", final  # the job itself ran normally, as snodo
    assert _digest(*guarded) == before
    assert (root / ".snodo" / "protocol.yml").read_text() == PROTOCOL
    log = (root / ".git" / "snodo" / "jobs" / accepted["job_id"] / "log.txt").read_text()
    assert "payload ran" not in log
    assert snodo(root, home, "audit", "verify").returncode == 0
    assert [e["data"]["job_id"] for e in audit(root, "dispatch_request")] == [accepted["job_id"]]


def _venv_without_the_snodo_script(tmp_path: Path) -> Path:
    """This venv's interpreter and packages, but no ``snodo`` script beside ``python``: the
    layout where ``snodo serve --print-config`` falls back to ``python -I -m snodo``."""
    venv = tmp_path / "venv"
    (venv / "bin").mkdir(parents=True)
    (venv / "bin" / "python").symlink_to(os.path.realpath(sys.executable))
    cfg = Path(sys.prefix) / "pyvenv.cfg"
    (venv / "pyvenv.cfg").write_text(cfg.read_text())
    purelib = Path(sysconfig.get_paths()["purelib"])
    target = venv / purelib.relative_to(sys.prefix)
    target.parent.mkdir(parents=True)
    target.symlink_to(purelib)
    return venv / "bin" / "python"


def test_the_serve_fallback_command_never_imports_the_agents_package(tmp_path: Path) -> None:
    if sys.prefix == sys.base_prefix:  # pragma: no cover - the suite runs from a venv
        pytest.skip("needs a virtual environment to copy")
    home = tmp_path / "home"
    marker = tmp_path / "payload-ran"
    root = make_project(tmp_path / "repo", PROTOCOL)
    python = _venv_without_the_snodo_script(tmp_path)
    env = {**os.environ, "SNODO_HOME": str(home)}
    printed = subprocess.run(
        [str(python), "-m", "snodo", "serve", "--print-config", "generic"],
        cwd=root,
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
    )
    assert printed.returncode == 0, printed.stderr
    entry = json.loads(printed.stdout)
    assert entry["command"] == str(python) and entry["args"][:4] == ["-I", "-m", "snodo", "serve"], entry
    # The agent's package, in the directory the host starts the server in, and on PYTHONPATH.
    (root / "snodo").mkdir()
    for name in ("__init__.py", "__main__.py"):
        (root / "snodo" / name).write_text(_payload(marker, root, home))
    before = _digest(root / ".snodo" / "protocol.yml")
    params = StdioServerParameters(
        command=entry["command"],
        args=entry["args"],
        cwd=str(root),
        env={**entry["env"], "PYTHONPATH": str(root), "PATH": os.environ["PATH"]},
    )
    tools = anyio.run(_tool_names, params)
    assert "write_file" in tools and "dispatch_task" in tools, tools  # snodo answered
    assert not marker.exists(), marker.read_text()
    assert _digest(root / ".snodo" / "protocol.yml") == before


async def _tool_names(params: StdioServerParameters) -> list[str]:
    """Start the server as a host would and list its tools through the official SDK."""
    async with stdio_client(params) as (read, write), ClientSession(read, write) as session:
        await session.initialize()
        return [tool.name for tool in (await session.list_tools()).tools]
