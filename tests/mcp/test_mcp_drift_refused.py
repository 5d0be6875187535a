"""Every tool that issues or consumes a token or runs confined code refuses a drifted protocol
first: before a token is issued or used, before any of the project's code runs, with the same
refusal and a ``tool_refused`` record.

Real server over stdio, real official SDK client. The project's one test appends a line to a
file outside the project each time it runs (``sandbox: off``, so nothing stops it): the file is
the evidence of whether project code ran.
"""

from __future__ import annotations

from pathlib import Path

from mcp_harness import Served, audit, git, make_project, serve

PROTOCOL = """\
protocol_id: drift
name: Drift refused
modes:
  - mode_id: producer
    tools: [read, edit, test, validate, dispatch, plan]
    validators: [scope, early, suite]
    coder: mock
    coder_config: {files: {"done.txt": "done\\n"}}
validators:
  - {validator_id: scope, validator_type: protocol}
  - {validator_id: early, validator_type: pytest, evaluation_phase: pre_execute, tooling: {timeout: 120}}
  - {validator_id: suite, validator_type: pytest, evaluation_phase: post_execute, tooling: {timeout: 120}}
execution: {sandbox: "off"}
"""
SPEC = "Add done.txt."
#: What only the code that runs project code, issues a token or uses one records.
WORK_EVENTS = ("validate", "token_issued", "token_consumed", "dispatch_request", "plan_run")


def _project(tmp_path: Path) -> tuple[Path, Path]:
    marker = tmp_path / "ran.log"
    root = make_project(tmp_path / "repo", PROTOCOL)
    (root / "tests").mkdir()
    (root / "tests" / "test_ok.py").write_text(
        f"def test_ok():\n    with open({str(marker)!r}, 'a') as f:\n        f.write('ran\\n')\n"
    )
    git(root, "add", "-A")
    git(root, "commit", "-qm", "protocol and suite")
    return root, marker


def _work(root: Path) -> dict[str, int]:
    return {e: len(audit(root, e)) for e in WORK_EVENTS}


def _refusals(root: Path) -> dict[str, str]:
    return {str(r["data"]["tool"]): str(r["data"]["reason"]) for r in audit(root, "tool_refused")}


def _all_refused(served: Served, root: Path, marker: Path, plan_id: str, says: str) -> None:
    before, ran = _work(root), marker.read_text() if marker.exists() else ""
    calls = {
        "run_tests": {},
        "validate_task": {"task_spec": SPEC},
        "dispatch_task": {"task_spec": SPEC},
        "run_plan": {"plan_id": plan_id},
    }
    for tool, arguments in calls.items():
        refused = served.refused(tool, arguments)
        assert refused.startswith(f"{tool} refused: "), refused
        assert says in refused and "no token was issued or used" in refused, refused
    assert _work(root) == before, "a token was issued or used, or a job started, under the drifted protocol"
    assert (marker.read_text() if marker.exists() else "") == ran, "project code ran under the drifted protocol"
    refusals = _refusals(root)
    for tool in calls:
        assert says in refusals.get(tool, ""), refusals


def test_every_token_or_code_tool_refuses_a_drifted_working_tree(tmp_path: Path) -> None:
    root, marker = _project(tmp_path)
    protocol = root / ".snodo" / "protocol.yml"
    committed = protocol.read_text()
    with serve(root, tmp_path / "home", "--mode", "producer") as served:
        plan_id = str(served.ok("propose_plan", {"goal": "- Add done.txt."})["plan_id"])  # executes nothing
        protocol.write_text(committed + "# edited by the host's own tool\n")
        _all_refused(served, root, marker, plan_id, "the working-tree protocol is not the one in force")
        assert served.ok("read_file", {"path": "README.md"})["content"]  # what runs nothing still works

        protocol.write_text(committed)  # the rules in force again: the same calls run
        assert served.ok("run_tests")["passed"] is True
        assert marker.read_text().count("ran") == 1
        assert served.ok("validate_task", {"task_spec": SPEC})["token_issued"] is True
        assert len(audit(root, "token_issued")) == 1


def test_every_token_or_code_tool_refuses_rules_committed_after_the_server_started(tmp_path: Path) -> None:
    """A commit changed the rules in force: the server would issue tokens and run code under
    rules it did not load."""
    root, marker = _project(tmp_path)
    protocol = root / ".snodo" / "protocol.yml"
    with serve(root, tmp_path / "home", "--mode", "producer") as served:
        plan_id = str(served.ok("propose_plan", {"goal": "- Add done.txt."})["plan_id"])
        protocol.write_text(protocol.read_text() + "# a committed change\n")
        git(root, "commit", "-qam", "protocol: a comment")
        _all_refused(served, root, marker, plan_id, "the protocol in force changed since this server started")
