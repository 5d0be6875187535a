"""validate_task's task_id is optional, through a real MCP client: derived from the spec like
dispatch_task and the CLI derive it; with only a task_id, the spec last validated for it."""

from __future__ import annotations

from pathlib import Path

from mcp_harness import make_project, serve

from snodo.rules.taskids import derive_task_id

SPEC = "Add a greeting module named `greeting.py` with a function `greeting()`.\n"


def test_validate_task_derives_the_task_id_and_revalidates_by_id(module_dir: Path, module_home: Path) -> None:
    root = make_project(module_dir / "repo", template="solo", home=module_home)
    with serve(root, module_home, "--mode", "producer") as s:
        schema = next(t for t in s.list_tools() if t.name == "validate_task").input_schema
        assert schema.get("required", []) == [], schema
        assert "task_id?" in s.instructions

        first = s.ok("validate_task", {"task_spec": SPEC})
        assert first["task_id"] == derive_task_id(SPEC)
        assert first["status"] == "pass", first

        again = s.ok("validate_task", {"task_id": first["task_id"]})
        assert again["task_id"] == first["task_id"] and again["status"] == "pass"

        named = s.ok("validate_task", {"task_spec": SPEC, "task_id": "my-task"})
        assert named["task_id"] == "my-task"

        assert "task_spec" in s.refused("validate_task", {})
        assert "has not validated task 'never-seen'" in s.refused("validate_task", {"task_id": "never-seen"})
    assert "Traceback" not in s.stderr()
