"""Only a mode holding `dispatch` runs tasks: `snodo run --mode M` and the MCP path that starts
jobs (`dispatch_task`, `run_plan`'s hand-off) refuse any other mode before anything runs,
naming the capability. Real subprocesses; a real MCP client over stdio."""

from __future__ import annotations

import subprocess
from pathlib import Path

from tests.mcp.mcp_harness import audit, serve
from tests.protocol.markers import (
    git,
    install_marker_plugin,
    make_sample_project,
    snodo_argv,
    snodo_env,
)

PROTOCOL = """\
protocol_id: gate
name: Dispatch gate
initial_mode: producer
modes:
  - mode_id: producer
    tools: [read, edit, dispatch]
    validators: [gate, judge]
    coder: marker-coder
  - mode_id: reviewer
    tools: [review, test]
    validators: [gate, judge]
    coder: marker-coder
  - mode_id: planner
    tools: [read, plan]
    validators: [gate]
    transitions: [{to: reviewer, on: run_plan}]
    coder: mock
validators:
  - {validator_id: gate, validator_type: marker, evaluation_phase: pre_execute}
  - {validator_id: judge, validator_type: marker, evaluation_phase: post_execute}
"""

REFUSAL = (
    "mode 'reviewer' does not hold the 'dispatch' capability, so it cannot run tasks (modes that can: producer); "
    "nothing was run. Choose a mode that holds it, or add 'dispatch' to the mode's tools (see docs/protocol.md)"
)


def project(tmp_path: Path) -> tuple[Path, Path, Path]:
    root = make_sample_project(tmp_path / "project")
    (root / ".snodo").mkdir()
    (root / ".snodo" / "protocol.yml").write_text(PROTOCOL)
    git(root, "add", "-A")
    git(root, "commit", "-qm", "protocol")
    markers = tmp_path / "markers"
    markers.mkdir()
    return root, markers, install_marker_plugin(tmp_path / "site")


def test_run_in_a_mode_without_dispatch_is_refused_before_anything_runs(tmp_path: Path) -> None:
    root, markers, site = project(tmp_path)
    env = snodo_env(tmp_path / "home", site, markers)
    r = subprocess.run(
        snodo_argv("run", "add a hello module", "--mode", "reviewer"), cwd=root, env=env, capture_output=True, text=True
    )
    assert r.returncode == 4, r.stderr
    # messages wrap at the terminal width (80 columns off a terminal), never cut
    assert f"error: {REFUSAL}" in " ".join(r.stderr.split()) and "Traceback" not in r.stderr
    assert not list(markers.iterdir()) and not (root / ".git" / "snodo" / "jobs").exists()
    ok = subprocess.run(
        snodo_argv("run", "add a hello module", "--mode", "producer"), cwd=root, env=env, capture_output=True, text=True
    )
    assert ok.returncode == 0, ok.stdout + ok.stderr
    assert {p.name for p in markers.iterdir()} == {"validator-gate", "coder-built", "coder-ran", "validator-judge"}


def test_run_plan_into_a_mode_without_dispatch_is_refused(tmp_path: Path) -> None:
    """The planner hands run_plan's tasks to the reviewer, which cannot run tasks: no job starts."""
    builtins = PROTOCOL.replace(
        "validator_type: marker, evaluation_phase: pre", "validator_type: protocol, evaluation_phase: pre"
    )
    builtins = builtins.replace("validator_type: marker", "validator_type: pytest").replace("marker-coder", "mock")
    root = make_sample_project(tmp_path / "project")
    (root / ".snodo").mkdir()
    (root / ".snodo" / "protocol.yml").write_text(builtins)
    git(root, "add", "-A")
    git(root, "commit", "-qm", "protocol")
    with serve(root, tmp_path / "home", "--mode", "planner") as planner:
        assert "dispatch_task" not in planner.tool_names()
        plan = planner.ok("propose_plan", {"goal": "add a module named `hi.py`"})
        refused = planner.refused("run_plan", {"plan_id": plan["plan_id"]})
    assert REFUSAL in refused
    assert not audit(root, "dispatch_request")
    assert not (root / ".git" / "snodo" / "jobs").exists()
