"""The file tools beyond the guard table: text only, atomic, symlink-aware, clear errors."""

from __future__ import annotations

import os
import stat
from collections.abc import Callable
from pathlib import Path

import pytest

from snodo.base.errors import PathValidationError, ToolError
from snodo.workspace import MAX_READ_BYTES, PathGuard, Workspace

from .conftest import snapshot


def test_list_files_is_sorted_root_relative_and_skips_git(workspace: Workspace) -> None:
    listed = workspace.list_files()
    assert listed == sorted(listed)
    assert ".snodo/protocol.yml" in listed
    assert "src/app.py" in listed
    assert "src_link" in listed  # a symlinked directory is named, not entered
    assert "src_link/app.py" not in listed
    assert not any(p == ".git" or p.startswith(".git/") for p in listed)
    assert workspace.list_files("src") == ["src/app.py"]
    assert workspace.list_files("src/app.py") == ["src/app.py"]


def test_reads_stay_inside_the_root(workspace: Workspace) -> None:
    for path in ("../outside/file.txt", "link_out/file.txt", "/etc/passwd"):
        with pytest.raises(PathValidationError, match="escapes the project root"):
            workspace.read_file(path)
    with pytest.raises(PathValidationError):
        workspace.list_files("..")


def test_read_errors_are_clear(project: Path, workspace: Workspace) -> None:
    (project / "blob.bin").write_bytes(b"\x89PNG\x00\x01")
    (project / "latin1.txt").write_bytes("caf\xe9".encode("latin-1"))
    (project / "big.txt").write_bytes(b"a" * (MAX_READ_BYTES + 1))
    cases = {
        "blob.bin": "binary",
        "latin1.txt": "binary",
        "big.txt": "limit",
        "nope.txt": "no such file",
        "src": "directory",
    }
    for path, words in cases.items():
        with pytest.raises(ToolError, match=words):
            workspace.read_file(path)
    with pytest.raises(ToolError, match="no such"):
        workspace.list_files("nope")


def test_write_is_exact_utf8_and_keeps_the_mode(project: Path, workspace: Workspace) -> None:
    script = project / "run.sh"
    script.write_text("old\n")
    script.chmod(0o755)
    result = workspace.write_file("run.sh", "new\r\nlines — ünïcode\n")
    assert result == {"path": "run.sh", "bytes": len("new\r\nlines — ünïcode\n".encode()), "created": False}
    assert script.read_bytes() == "new\r\nlines — ünïcode\n".encode()
    assert stat.S_IMODE(script.stat().st_mode) == 0o755
    assert not [p for p in os.listdir(project) if p.endswith(".tmp")]


def test_write_through_a_symlink_keeps_the_link(project: Path, workspace: Workspace) -> None:
    assert workspace.write_file("src_link/app.py", "via link\n")["path"] == "src/app.py"
    assert (project / "src_link").is_symlink()
    assert (project / "src/app.py").read_text() == "via link\n"


def test_delete_removes_a_symlink_not_its_target(project: Path, workspace: Workspace) -> None:
    assert workspace.delete_file("src_link") == {"path": "src_link", "deleted": True}
    assert not os.path.lexists(project / "src_link")
    assert (project / "src/app.py").exists()


def test_refusals_of_bad_arguments(project: Path, workspace: Workspace) -> None:
    before = snapshot(project.parent)
    bad: list[tuple[Callable[[], object], str]] = [
        (lambda: workspace.write_file("src", "x"), "directory"),
        (lambda: workspace.write_file("newdir/", "x"), "directory"),
        (lambda: workspace.write_file("x.txt", b"bytes"), "text"),  # type: ignore[arg-type]
        (lambda: workspace.write_file("x.txt", "\udc80"), "UTF-8"),
        (lambda: workspace.write_file("src/app.py/child", "x"), "cannot"),
        (lambda: workspace.write_file("loop/x", "x"), "cannot"),
        (lambda: workspace.delete_file("nope.txt"), "no such file"),
        (lambda: workspace.delete_file("src"), "directory"),
        (lambda: workspace.create_directory("src/app.py"), "file of that name"),
    ]
    for call, words in bad:
        with pytest.raises(ToolError, match=words):
            call()
    assert snapshot(project.parent) == before


def test_the_guard_must_watch_the_same_root(project: Path, tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="guard watches"):
        Workspace(project / "src", PathGuard(project))
