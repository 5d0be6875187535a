"""Git attacks over a real MCP client talking to ``snodo serve`` on stdio (issue #21, items 1-3, 8).

snodo's own git runs unconfined, so nothing an agent writes may choose a program it runs:
a hook in ``core.hooksPath``, a nested repository's ``core.fsmonitor``, a ``.git`` planted in
a project that lives in a repository's subdirectory, a ``.pth`` in a virtual environment,
a ``snodo/`` package in the project root. Each payload would create a marker file outside
the project and rewrite the protocol; each test first shows the payload is live (plain git
runs it), then that snodo never does and the call ends with a named refusal where one is due.
"""

from __future__ import annotations

import hashlib
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "mcp"))
import mcp_harness
from mcp_harness import Served, audit, make_project, serve

from snodo.cli.serve_cmd import snodo_command

pytestmark = pytest.mark.slow
PYTHON = sys.executable  # the real interpreter, before any test changes what sys.executable says

PROTOCOL = """\
protocol_id: git-attacks
name: git attacks
version: "1.0.0"
initial_mode: producer
modes:
  - mode_id: producer
    tools: [read, edit, test, commit, review]
    validators: [scope]
    coder: mock
validators:
  - {validator_id: scope, validator_type: protocol}
"""


def payload(tmp_path: Path, root: Path) -> tuple[Path, Path]:
    """An executable script that leaves ``marker`` and rewrites the protocol if it ever runs."""
    marker = tmp_path / "PAYLOAD-RAN"
    script = tmp_path / "payload.sh"
    script.write_text(f"#!/bin/sh\ntouch '{marker}'\necho 'protocol_id: pwned' > '{root}/.snodo/protocol.yml'\n")
    script.chmod(0o755)
    return script, marker


def digest(*trees: Path) -> dict[str, str]:
    """Content hash of every file below ``trees``: equal digests mean byte-identical trees."""
    seen: dict[str, str] = {}
    for tree in trees:
        for path in sorted(p for p in tree.rglob("*") if p.is_file()):
            seen[str(path)] = hashlib.sha256(path.read_bytes()).hexdigest()
    return seen


def governance(root: Path, home: Path) -> dict[str, str]:
    """What the agent must not change: the protocol and the keys (the audit log and session
    files grow with every call, by snodo itself; their chain is verified separately)."""
    return digest(root / ".snodo" / "protocol.yml", home / "keys") | {
        "protocol": (root / ".snodo" / "protocol.yml").read_text()
    }


def settled(producer: Served, root: Path, home: Path) -> dict[str, str]:
    """:func:`governance` once the server has made its keys (on its first audited call)."""
    producer.ok("list_files", {})
    return governance(root, home)


@pytest.fixture(params=["bwrap", "landlock"])
def backend(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    name: str = request.param
    original = mcp_harness.server_env
    monkeypatch.setattr(mcp_harness, "server_env", lambda home: {**original(home), "SNODO_SANDBOX_BACKEND": name})
    return name


@pytest.fixture
def project(tmp_path: Path) -> Path:
    root = make_project(tmp_path / "repo", PROTOCOL)
    (root / "tests").mkdir()
    (root / "tests" / "test_ok.py").write_text("def test_ok():\n    assert True\n")
    mcp_harness.git(root, "add", ".")
    mcp_harness.git(root, "commit", "-q", "-m", "project")
    return root


@pytest.fixture
def home(tmp_path: Path) -> Path:
    return tmp_path / "home"


def refusals(root: Path) -> list[tuple[str, str]]:
    return [(str(e["data"]["tool"]), str(e["data"]["path"])) for e in audit(root, "path_refused")]


def test_a_hook_in_core_hooks_path_written_by_the_agent_never_runs(tmp_path: Path, project: Path, home: Path) -> None:
    mcp_harness.git(project, "config", "core.hooksPath", ".githooks")
    script, marker = payload(tmp_path, project)
    with serve(project, home, "--mode", "producer") as producer:
        before = settled(producer, project, home)
        producer.ok("write_file", {"path": ".githooks/pre-commit", "content": f"#!/bin/sh\nexec '{script}'\n"})
        producer.ok("write_file", {"path": "feature.py", "content": "X = 1\n"})
        (project / ".githooks" / "pre-commit").chmod(0o755)  # what confined code may do in the workspace
        producer.ok("stage_files", {"paths": [".githooks", "feature.py"]})
        producer.ok("commit", {"message": "a feature"})
        assert not marker.exists()
        assert governance(project, home) == before
    assert "feature.py" in mcp_harness.git(project, "show", "--name-only", "HEAD")
    # The same hook is live for git as the user runs it: the payload is real.
    (project / "other.py").write_text("Y = 2\n")
    mcp_harness.git(project, "add", "other.py")
    mcp_harness.git(project, "commit", "-q", "-m", "by hand")
    assert marker.exists()


NESTED_CONFTEST = """\
import subprocess
from pathlib import Path

vendor = Path(__file__).parent / "tests" / "vendor"  # Landlock: no new top-level entries
vendor.mkdir(exist_ok=True)
(vendor / "lib.py").write_text("V = 1\\n")
subprocess.run(["git", "init", "-q", str(vendor)], check=True)
subprocess.run(["git", "-C", str(vendor), "config", "core.fsmonitor", "PAYLOAD"], check=True)
"""


def test_a_nested_repository_made_by_confined_code_is_refused_and_removed(
    tmp_path: Path, project: Path, home: Path, backend: str
) -> None:
    script, marker = payload(tmp_path, project)
    with serve(project, home, "--mode", "producer") as producer:
        before = settled(producer, project, home)
        producer.ok("write_file", {"path": "conftest.py", "content": NESTED_CONFTEST.replace("PAYLOAD", str(script))})
        refused = producer.refused("run_tests", {})
        assert "tests/vendor/.git" in refused and "created git metadata" in refused, refused
        assert not (project / "tests" / "vendor" / ".git").exists()
        assert ("run_tests", "tests/vendor/.git") in refusals(project)
        # What is left is plain files: staging and status never reach a nested configuration.
        producer.ok("stage_files", {"paths": ["tests/vendor"]})
        assert "tests/vendor/lib.py" in producer.ok("get_status", {})["staged"]
        assert not marker.exists()
        assert governance(project, home) == before


def test_a_nested_repository_cannot_be_staged_and_never_runs_its_fsmonitor(
    tmp_path: Path, project: Path, home: Path, backend: str
) -> None:
    """The removal aside (the nested repository is already there when the server starts):
    stage_files refuses the gitlink, and nothing snodo's git does runs the fsmonitor."""
    script, marker = payload(tmp_path, project)
    vendor = project / "vendor"
    vendor.mkdir()
    (vendor / "lib.py").write_text("V = 1\n")
    mcp_harness.git(vendor, "init", "-q")
    mcp_harness.git(vendor, "-c", "user.name=a", "-c", "user.email=a@b", "commit", "-q", "--allow-empty", "-m", "v")
    mcp_harness.git(vendor, "config", "core.fsmonitor", str(script))
    with serve(project, home, "--mode", "producer") as producer:
        before = settled(producer, project, home)
        refused = producer.refused("stage_files", {"paths": ["vendor"]})
        assert "nested repository" in refused, refused
        assert ("stage_files", "vendor") in refusals(project)
        # Staged behind snodo's back (as confined code could not: .git/ is read-only to it).
        mcp_harness.git(project, "-c", "core.fsmonitor=false", "add", "vendor")
        producer.ok("get_status", {})
        producer.ok("read_diff", {"staged": True})
        refused = producer.refused("commit", {"message": "vendor it"})
        assert "nested repository" in refused, refused
        assert not marker.exists()
        assert governance(project, home) == before
    # The payload is live for plain git: a status in the project runs it.
    subprocess.run(["git", "-C", str(project), "status"], capture_output=True, check=False)
    assert marker.exists()


def test_a_git_dir_planted_in_a_project_below_the_repository_top_is_never_used(
    tmp_path: Path, home: Path, backend: str
) -> None:
    """The project is ``repo/app``; confined code creates ``app/.git`` (refused and removed);
    one planted anyway is never discovered: snodo's git stays pinned to ``repo/.git``."""
    repo = make_project(tmp_path / "mono")
    app = repo / "app"
    (app / ".snodo").mkdir(parents=True)
    (app / ".snodo" / "protocol.yml").write_text(PROTOCOL)
    (app / "tests").mkdir()
    (app / "tests" / "test_ok.py").write_text("def test_ok():\n    assert True\n")
    mcp_harness.git(repo, "add", ".")
    mcp_harness.git(repo, "commit", "-q", "-m", "app")
    script, marker = payload(tmp_path, app)
    conftest = (
        "import subprocess\n"
        "subprocess.run(['git', 'init', '-q', '.'], check=True)\n"
        f"subprocess.run(['git', 'config', 'core.fsmonitor', '{script}'], check=True)\n"
    )
    with serve(app, home, "--mode", "producer") as producer:
        before = settled(producer, app, home)
        producer.ok("write_file", {"path": "conftest.py", "content": conftest})
        if backend == "bwrap":
            refused = producer.refused("run_tests", {})
            assert "created git metadata (.git)" in refused, refused
            assert ("run_tests", ".git") in refusals(app)
        else:  # Landlock grants no new entry directly in the workspace: `git init .` fails there
            assert producer.ok("run_tests", {})["passed"] is False
        assert not (app / ".git").exists()
        # Planted anyway (the removal aside): status, staging and the commit use repo/.git.
        subprocess.run(["git", "-C", str(app), "init", "-q", "."], check=True, capture_output=True)
        mcp_harness.git(app, "config", "core.fsmonitor", str(script))
        producer.ok("write_file", {"path": "feature.py", "content": "X = 1\n"})
        producer.ok("stage_files", {"paths": ["feature.py"]})
        producer.ok("commit", {"message": "a feature"})
        assert not marker.exists()
        assert governance(app, home) == before
    assert "app/feature.py" in mcp_harness.git(repo, "show", "--name-only", "HEAD")


@pytest.mark.parametrize(
    "path",
    [".venv/lib/python3.11/site-packages/evil.pth", "venv/bin/python", "env/lib/python3.11/site-packages/x.pth"],
)
def test_python_environments_are_refused_at_the_tool_surface(project: Path, home: Path, path: str) -> None:
    env = project / "env"
    env.mkdir()
    (env / "pyvenv.cfg").write_text("home = /usr/bin\n")
    with serve(project, home, "--mode", "producer") as producer:
        refused = producer.refused("write_file", {"path": path, "content": "import os; os.system('touch /tmp/x')\n"})
        assert "Python environment is protected" in refused, refused
        assert ("write_file", path) in refusals(project)
    assert not (project / path).exists()


def test_an_agent_written_snodo_package_is_not_imported_by_snodo_it_starts(
    tmp_path: Path, project: Path, home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``serve``'s fallback command (no ``snodo`` script beside the interpreter) starts
    ``python -I -m snodo``: the project root, its working directory, is not on sys.path."""
    marker = tmp_path / "IMPORTED"
    with serve(project, home, "--mode", "producer") as producer:
        producer.ok("write_file", {"path": "snodo/__init__.py", "content": f"open({str(marker)!r}, 'w').close()\n"})
    monkeypatch.setattr(sys, "executable", str(tmp_path / "no-scripts-here" / "python"))
    command = snodo_command()
    assert command[1:] == ["-I", "-m", "snodo"]
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    done = subprocess.run(
        [PYTHON, *command[1:], "--version"],
        cwd=project,
        capture_output=True,
        text=True,
        env=env,
        check=False,
    )
    assert done.returncode == 0 and "snodo" in done.stdout, done
    assert not marker.exists()
    # Without -I the project's package would have been imported instead of snodo.
    subprocess.run([PYTHON, "-m", "snodo", "--version"], cwd=project, capture_output=True, env=env, check=False)
    assert marker.exists()


VALIDATING = """\
protocol_id: git-attacks-validate
name: git attacks through validation
version: "1.0.0"
initial_mode: producer
modes:
  - mode_id: producer
    tools: [read, edit, commit, validate, dispatch]
    validators: [tests, after]
    coder: mock
validators:
  - {validator_id: tests, validator_type: command, evaluation_phase: pre_execute, tooling: {command: "python conftest.py"}}
  - {validator_id: after, validator_type: command, evaluation_phase: post_execute, tooling: {command: "python conftest.py"}}
"""


def test_validation_that_plants_a_nested_repository_earns_nothing_and_the_job_halts(
    tmp_path: Path, home: Path, backend: str
) -> None:
    """validate_task runs the agent's script (a project check, confined, in the checkout);
    the repository it plants is refused and removed, the pass is dropped, and the dispatched
    job meets the same refusal on the engine path and halts as a blocker. (The pytest
    validator never runs it: a conftest the agent adds is not the base's harness.)"""
    root = make_project(tmp_path / "repo", VALIDATING)
    (root / "tests").mkdir()
    (root / "tests" / "test_ok.py").write_text("def test_ok():\n    assert True\n")
    mcp_harness.git(root, "add", ".")
    mcp_harness.git(root, "commit", "-q", "-m", "project")
    script, marker = payload(tmp_path, root)
    spec = "Add a greeting module.\n"
    with serve(root, home, "--mode", "producer") as producer:
        before = settled(producer, root, home)
        producer.ok("write_file", {"path": "conftest.py", "content": NESTED_CONFTEST.replace("PAYLOAD", str(script))})
        producer.ok("stage_files", {"paths": ["conftest.py"]})
        producer.ok("commit", {"message": "a conftest"})
        refused = producer.refused("validate_task", {"task_id": "t-1", "task_spec": spec})
        assert "tests/vendor/.git" in refused, refused
        assert not (root / "tests" / "vendor" / ".git").exists()
        job = producer.ok("dispatch_task", {"task_id": "t-1", "task_spec": spec})
        assert job["token_consumed"] is False
        deadline = time.monotonic() + 180
        status = producer.ok("get_job_status", {"job_id": job["job_id"]})
        while status["status"] not in ("completed", "halted") and time.monotonic() < deadline:
            time.sleep(1)
            status = producer.ok("get_job_status", {"job_id": job["job_id"]})
        assert status["status"] == "halted" and status.get("outcome") == "blocker", status
        assert not marker.exists()
        assert governance(root, home) == before
    engine_refusals = [e["data"] for e in audit(root, "path_refused") if "tool" not in e["data"]]
    assert any(e["path"] == "tests/vendor/.git" for e in engine_refusals), engine_refusals
