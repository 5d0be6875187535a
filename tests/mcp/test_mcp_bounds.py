"""Bounded inputs through a real MCP client: huge arguments and impossible paths are refused
as such (never "internal error"), and the audit log keeps only a digest of what was sent."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from mcp_harness import Served, audit, make_project, serve

from snodo.mcp.checks import MAX_ARGUMENT_BYTES, path_problem


@pytest.fixture(scope="module")
def project(module_dir: Path, module_home: Path) -> Path:
    return make_project(module_dir / "bounds", template="solo", home=module_home)


@pytest.fixture(scope="module")
def served(project: Path, module_home: Path) -> Iterator[Served]:
    with serve(project, module_home) as s:
        yield s
    assert "Traceback" not in s.stderr()


def log_size(project: Path) -> int:
    log = project / ".git" / "snodo" / "audit.log"
    return log.stat().st_size if log.exists() else 0


def test_a_10_mb_argument_is_refused_and_not_recorded(served: Served, project: Path) -> None:
    before = log_size(project)
    text = served.refused("write_file", {"path": "big.txt", "content": "x" * 10_000_000})
    assert "larger than the limit" in text and f"{MAX_ARGUMENT_BYTES:,}" in text
    assert "SNODO_MAX_ARGUMENT_BYTES" in text and "internal error" not in text
    assert len(text) < 1000  # the reply does not echo the argument
    assert not (project / "big.txt").exists()
    assert log_size(project) - before < 4000  # nor does the audit log
    assert audit(project, "tool_refused")[-1]["data"]["tool"] == "write_file"


def test_a_large_spec_within_the_limit_is_audited_as_digest_and_excerpt(served: Served, project: Path) -> None:
    before = log_size(project)
    spec = "Add a module named `hello.py`.\n" + "padding " * 200_000  # 1.6 MB
    reply = served.call("validate_task", {"task_id": "big-spec", "task_spec": spec})
    assert "internal error" not in str(reply.content)
    assert log_size(project) - before < 64_000


def test_a_10000_character_path_is_refused_like_any_bad_path(served: Served, project: Path) -> None:
    long_path = "d" * 10_000
    for tool, args in (
        ("read_file", {"path": long_path}),
        ("write_file", {"path": long_path, "content": "x"}),
        ("list_files", {"path": long_path}),
        ("stage_files", {"paths": ["ok.txt", long_path]}),
    ):
        text = served.refused(tool, args)
        assert "internal error" not in text and "a bug in snodo" not in text, text
        assert "10,000 bytes long" in text and "4096" in text, text
        assert len(text) < 1000
    refused = audit(project, "path_refused")[-1]["data"]
    assert refused["source"] == "mcp" and len(str(refused["path"])) < 1000


def test_a_path_with_an_overlong_component_or_nul_is_refused(served: Served) -> None:
    text = served.refused("write_file", {"path": "a/" + "b" * 300 + "/c.txt", "content": "x"})
    assert "longer than 255 bytes" in text
    text = served.refused("read_file", {"path": "a\x00b"})
    assert "NUL" in text


def test_the_limit_is_configurable(module_dir: Path, module_home: Path) -> None:
    root = make_project(module_dir / "small-limit", template="solo", home=module_home)
    with serve(root, module_home, env={"SNODO_MAX_ARGUMENT_BYTES": "1000"}) as s:
        assert "larger than the limit of 1,000 bytes" in s.refused(
            "write_file", {"path": "f.txt", "content": "y" * 2000}
        )
        s.ok("write_file", {"path": "f.txt", "content": "y" * 500})


def test_paths_that_cannot_name_a_file() -> None:
    assert path_problem("ok/fine.txt") is None
    assert "unpaired surrogate" in (path_problem("bad\ud800name") or "")
    assert "NUL" in (path_problem("a\x00") or "")
