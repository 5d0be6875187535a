"""A raising output callback never stalls a child; `jobs prune` removes merged task branches."""

from __future__ import annotations

import sys
from collections.abc import Callable
from pathlib import Path

from snodo.process.runner import run_process
from tests.conftest import CliResult, git, make_repo, write_producer_protocol


def test_a_raising_on_line_is_reported_and_the_output_keeps_flowing(tmp_path: Path) -> None:
    seen: list[str] = []

    def broken(line: str) -> None:
        seen.append(line)
        raise RuntimeError("display gone")

    # far more output than a pipe buffer holds: a dead pump would block the child until its time limit
    code = "import sys\nfor i in range(20000):\n    print('line', i, 'x' * 40)\n"
    result = run_process([sys.executable, "-c", code], cwd=tmp_path, timeout=60, on_line=broken)
    assert result.ok and not result.timed_out
    assert seen == ["line 0 " + "x" * 40]  # called once, then no more
    assert "the output callback failed (RuntimeError: display gone)" in result.output
    assert "line 19999" in result.output


def test_prune_removes_merged_task_branches_only(tmp_path: Path, snodo_cli: Callable[..., CliResult]) -> None:
    repo = make_repo(tmp_path / "repo")
    write_producer_protocol(repo)
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", "protocol")
    first = snodo_cli("run", "add a hello module", "--mock", "--json", cwd=repo).json()
    second = snodo_cli("run", "add a goodbye module", "--mock", "--json", cwd=repo).json()
    assert first["status"] == second["status"] == "completed"
    git(repo, "merge", "-q", "--no-edit", first["branch"])
    pruned = snodo_cli("jobs", "prune", "--json", cwd=repo).json()
    assert [b["branch"] for b in pruned["branches"]] == [first["branch"]]
    assert pruned["branches"][0]["merged_into"] == "main"
    heads = git(repo, "branch", "--format=%(refname:short)").split()
    assert first["branch"] not in heads and second["branch"] in heads  # unmerged work stays
    said = snodo_cli("jobs", "prune", cwd=repo)
    assert said.returncode == 0
