"""The patch coder on its own: diffs in, whole-file operations out, and clear refusals."""

from __future__ import annotations

from pathlib import Path

import pytest
from snodo_patch_coder import PatchCoder

from snodo.api import CoderError, CoderRequest, FileOperation


def run(tmp_path: Path, spec: str, config: dict[str, object] | None = None) -> tuple[FileOperation, ...]:
    request = CoderRequest(task_id="t1", spec=spec, workspace=tmp_path, mode_id="dev")
    return PatchCoder(config or {}).generate(request).operations


def fenced(diff: str) -> str:
    return f"Please apply this.\n\n```diff\n{diff}```\n"


def test_creates_a_file(tmp_path: Path) -> None:
    ops = run(tmp_path, fenced("--- /dev/null\n+++ b/hello.py\n@@ -0,0 +1,2 @@\n+def hello():\n+    return 1\n"))
    assert ops == (FileOperation(op="write", path="hello.py", content="def hello():\n    return 1\n"),)


def test_patches_an_existing_file_in_the_middle(tmp_path: Path) -> None:
    (tmp_path / "app.py").write_text("a = 1\nb = 2\nc = 3\nd = 4\n")
    diff = "--- a/app.py\n+++ b/app.py\n@@ -2,2 +2,3 @@\n b = 2\n-c = 3\n+c = 30\n+c2 = 31\n"
    (op,) = run(tmp_path, fenced(diff))
    assert op == FileOperation(op="write", path="app.py", content="a = 1\nb = 2\nc = 30\nc2 = 31\nd = 4\n")
    assert (tmp_path / "app.py").read_text() == "a = 1\nb = 2\nc = 3\nd = 4\n"  # the engine writes, not the coder


def test_deletes_a_file_and_renames_another(tmp_path: Path) -> None:
    (tmp_path / "old.py").write_text("x = 1\n")
    (tmp_path / "name.py").write_text("y = 2\n")
    diff = (
        "--- a/old.py\n+++ /dev/null\n@@ -1 +0,0 @@\n-x = 1\n"
        "--- a/name.py\n+++ b/renamed.py\n@@ -1 +1 @@\n-y = 2\n+y = 3\n"
    )
    assert run(tmp_path, fenced(diff)) == (
        FileOperation(op="delete", path="old.py"),
        FileOperation(op="delete", path="name.py"),
        FileOperation(op="write", path="renamed.py", content="y = 3\n"),
    )


def test_strip_setting_works_like_patch_p(tmp_path: Path) -> None:
    diff = "--- /dev/null\n+++ project/src/x.txt\n@@ -0,0 +1 @@\n+x\n"
    assert run(tmp_path, fenced(diff), {"strip": 1})[0].path == "src/x.txt"


def test_a_hunk_that_does_not_match_is_refused_by_name(tmp_path: Path) -> None:
    (tmp_path / "app.py").write_text("a = 1\n")
    with pytest.raises(CoderError, match=r"app\.py"):
        run(tmp_path, fenced("--- a/app.py\n+++ b/app.py\n@@ -1 +1 @@\n-a = 2\n+a = 3\n"))


def test_a_spec_without_a_diff_is_a_coder_error(tmp_path: Path) -> None:
    with pytest.raises(CoderError, match="no ```diff block"):
        run(tmp_path, "add a hello module")


def test_unknown_settings_are_refused_before_any_task() -> None:
    with pytest.raises(CoderError, match="unknown coder_config key"):
        PatchCoder({"stirp": 1})


def test_it_never_reads_outside_the_project(tmp_path: Path) -> None:
    (tmp_path / "outside.txt").write_text("secret\n")
    project = tmp_path / "project"
    project.mkdir()
    with pytest.raises(CoderError, match="outside the project"):
        run(project, fenced("--- a/../outside.txt\n+++ b/../outside.txt\n@@ -1 +1 @@\n-secret\n+leaked\n"))


def test_out_of_root_creations_are_proposed_for_the_engine_to_refuse(tmp_path: Path) -> None:
    """The coder does not police paths: the engine's artifact filter does (the kit checks it)."""
    ops = run(tmp_path, fenced("--- /dev/null\n+++ b/.snodo/x.yml\n@@ -0,0 +1 @@\n+x: 1\n"))
    assert ops == (FileOperation(op="write", path=".snodo/x.yml", content="x: 1\n"),)
