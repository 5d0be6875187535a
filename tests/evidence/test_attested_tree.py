"""The bytes attested are the bytes judged: the statement names the judged tree, and a tip
whose tree is not the one the validators judged is not attested at all."""

from __future__ import annotations

import base64
import json
from pathlib import Path

from snodo.evidence.attest import attest_run
from snodo.governance.service import Project
from snodo.plugin.host import get_plugin_manager
from snodo.protocol import load_protocol
from tests.conftest import TRIVIAL_PROTOCOL, git, make_repo


def _project(tmp_path: Path) -> tuple[Project, Path]:
    repo = make_repo(tmp_path / "repo")
    (repo / ".snodo").mkdir()
    (repo / ".snodo" / "protocol.yml").write_text(TRIVIAL_PROTOCOL)
    git(repo, "add", ".snodo")
    git(repo, "commit", "-q", "-m", "protocol")
    host = get_plugin_manager()
    return Project(load_protocol(repo / ".snodo" / "protocol.yml", host), host, home=tmp_path / "home"), repo


def _attest(project: Project, base: str, judged_tree: str) -> list[str]:
    return attest_run(
        project,
        base=base,
        tip="HEAD",
        task_id="task-1",
        spec_sha="0" * 64,
        run_id="r1",
        coder="mock",
        reason="1 of 1 passed",
        results=[],
        audit={"seq": 0, "hash": "0" * 64},
        judged_tree=judged_tree,
    )


def test_a_tip_whose_tree_was_not_judged_is_not_attested(tmp_path: Path) -> None:
    project, repo = _project(tmp_path)
    base = git(repo, "rev-parse", "HEAD").strip()
    (repo / "work.py").write_text("X = 1\n")
    git(repo, "add", "work.py")
    git(repo, "commit", "-q", "-m", "work")
    judged = git(repo, "rev-parse", "HEAD^{tree}").strip()
    assert _attest(project, base, git(repo, "rev-parse", "HEAD~1^{tree}").strip()) == []
    failed = project.audit.records("attest_failed")[-1]["data"]
    assert "is not the tree the validators judged" in failed["error"]
    assert git(repo, "notes", "--ref=refs/notes/snodo", "list").strip() == ""

    assert _attest(project, base, judged) == [git(repo, "rev-parse", "HEAD").strip()]
    envelope = json.loads(git(repo, "notes", "--ref=refs/notes/snodo", "show", "HEAD"))
    statement = json.loads(base64.b64decode(envelope["payload"]))
    assert statement["predicate"]["judged_tree"] == judged
    assert judged in json.dumps(statement["subject"])  # the subject names the same tree
