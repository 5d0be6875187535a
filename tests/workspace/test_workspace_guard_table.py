"""INV2 / ADR 026 through every mutating tool: each adversarial spelling is refused with the
path and the reason named, and the tree (``.snodo/``, ``.git/`` and outside) is unchanged."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from snodo.base.errors import PathValidationError
from snodo.rules import guard as g
from snodo.workspace import Git, PathGuard, Workspace

from .conftest import PROTECTED, git, snapshot

SNODO, GIT, OUTSIDE, ROOT = g.REASON_SNODO, g.REASON_GIT, g.REASON_OUTSIDE, g.REASON_ROOT
CHAR, WIN, EMPTY, DOTS = g.REASON_CHARACTER, g.REASON_WINDOWS, g.REASON_EMPTY, g.REASON_DOTS
PROT = "protected_paths"

REFUSED = [
    # plain, relative and normalised spellings of .snodo/
    (".snodo/protocol.yml", SNODO),
    (".snodo", SNODO),
    (".snodo/", SNODO),
    ("./.snodo/protocol.yml", SNODO),
    ("src/../.snodo/protocol.yml", SNODO),
    ("nope/../.snodo/x", SNODO),
    (".snodo//protocol.yml", SNODO),
    (".snodo/./protocol.yml", SNODO),
    (".snodo/new_dir/new.txt", SNODO),
    (".snodo/jobs/j1/spec.md", SNODO),
    ("{root}/.snodo/protocol.yml", SNODO),
    ("{root}/./.snodo/state.json", SNODO),
    # case variants and Unicode look-alikes
    (".SNODO/protocol.yml", SNODO),
    (".Snodo/protocol.yml", SNODO),
    (".sNoDo", SNODO),
    ("\uff0e\uff53\uff4e\uff4f\uff44\uff4f/protocol.yml", SNODO),  # fullwidth
    (".\u017fnodo/protocol.yml", SNODO),  # long s
    (".\uff33\uff2e\uff2f\uff24\uff2f/x", SNODO),
    # invisible characters
    (".snodo\u200b/protocol.yml", CHAR),
    ("\u200b.snodo/protocol.yml", CHAR),
    (".sno\u200ddo/x", CHAR),
    (".snodo\ufeff/x", CHAR),
    (".sn\u034fodo/x", CHAR),
    # what Windows ignores: trailing dots and spaces, streams, 8.3 names
    (".snodo./protocol.yml", SNODO),
    (".snodo../x", SNODO),
    (".snodo /x", SNODO),
    (".snodo:stream", SNODO),
    ("SNODO~1/protocol.yml", SNODO),
    (".snodo\\protocol.yml", WIN),
    ("C:\\project\\.snodo", WIN),
    ("C:/x", WIN),
    ("\\\\server\\share\\x", WIN),
    # symlinks to and into .snodo/, symlinked parents
    ("link_to_snodo/protocol.yml", SNODO),
    ("link_to_snodo", SNODO),
    ("link_to_snodo/", SNODO),
    ("loop/../link_to_snodo", SNODO),  # found by hypothesis: a symlink loop cut realpath short
    ("link_into_snodo", SNODO),
    ("dangling_into_snodo", SNODO),
    ("deep/up/x", SNODO),
    ("deep/up", SNODO),
    # repository internals
    (".git/hooks/pre-commit", GIT),
    (".git/config", GIT),
    (".GIT/config", GIT),
    (".git", GIT),
    (".git./HEAD", GIT),
    ("GIT~1/config", GIT),
    ("link_to_git/hooks/x", GIT),
    ("src/.git/x", GIT),
    # out of the root
    ("../outside/file.txt", OUTSIDE),
    ("../x", OUTSIDE),
    ("src/../../outside/file.txt", OUTSIDE),
    ("{outside}/file.txt", OUTSIDE),
    ("/etc/passwd", OUTSIDE),
    ("//etc/passwd", OUTSIDE),
    ("link_out/file.txt", OUTSIDE),
    # malformed
    ("", EMPTY),
    ("   ", EMPTY),
    ("src/a\x00b", CHAR),
    ("src/a\nb", CHAR),
    ("...", DOTS),
    ("src/ /x", DOTS),
    (".", ROOT),
    ("{root}", ROOT),
    ("src/..", ROOT),
    # the protocol's protected_paths
    ("secrets/key.pem", PROT),
    ("secrets", PROT),
    ("secrets/new/file.txt", PROT),
    ("SECRETS/key.pem", PROT),
    ("./secrets/../secrets/key.pem", PROT),
    ("alias_secrets/key.pem", PROT),
    ("poetry.lock", PROT),
    ("config/a/b/prod.yml", PROT),
    ("config/prod.yml", PROT),
]


def _spell(template: str, root: Path) -> str:
    return template.replace("{root}", str(root)).replace("{outside}", str(root.parent / "outside"))


def _tools(root: Path) -> dict[str, Callable[[str], object]]:
    guard = PathGuard(root, PROTECTED)
    ws, repo = Workspace(root, guard), Git(root, guard)
    return {
        "write_file": lambda p: ws.write_file(p, "pwned\n"),
        "delete_file": ws.delete_file,
        "create_directory": ws.create_directory,
        "stage_files": lambda p: repo.stage_files([p]),
        "stage_files_among_good": lambda p: repo.stage_files(["src/app.py", p, "deep/readme.md"]),
    }


def test_the_table_is_adversarial_enough() -> None:
    assert len(REFUSED) >= 40
    assert "`.snodo/` is protected" in SNODO


@pytest.mark.parametrize("tool", list(_tools(Path("/nonexistent"))))
@pytest.mark.parametrize(("template", "reason"), REFUSED)
def test_refused_and_nothing_changes(shared_project: Path, tool: str, template: str, reason: str) -> None:
    path = _spell(template, shared_project)
    (shared_project / "src/app.py").write_text("changed, unstaged\n")  # something stageable
    before = snapshot(shared_project.parent)
    with pytest.raises(PathValidationError) as refused:
        _tools(shared_project)[tool](path)
    assert repr(path) in str(refused.value)
    assert reason in refused.value.reason
    assert snapshot(shared_project.parent) == before
    assert git(shared_project, "diff", "--cached", "--name-only") == ""


LEGIT_FILES = [
    "new_file.txt",
    "src/new_module.py",
    "nested/new/dirs/file.py",
    "snodo_notes.md",
    "snodo/x.py",
    "docs/.snodo-like",
    "a/.snodoX",
    ".snodo-backup/x.txt",
    ".snodorc",
    "my.snodo",
    ".gitignore",
    ".github/workflows/ci.yml",
    "src/.gitkeep",
    "src/./dot.py",
    "src/../up.py",
    "src_link/via_link.py",
    "secrets_public/x.txt",
    "docs/poetry.lock",
    "config/a/dev.yml",
    "caf\u00e9.txt",
    "{root}/src/abs.py",
]


@pytest.mark.parametrize("template", LEGIT_FILES)
def test_legitimate_file_round_trip(project: Path, workspace: Workspace, repo: Git, template: str) -> None:
    path = _spell(template, project)
    written = workspace.write_file(path, "hello\n")
    assert written["created"] is True
    assert workspace.read_file(path) == "hello\n"
    assert repo.stage_files([path])["staged"] == [written["path"]]
    assert written["path"] in repo.get_status()["staged"]  # type: ignore[operator]
    assert workspace.delete_file(path) == {"path": written["path"], "deleted": True}
    assert not (project / str(written["path"])).exists()


@pytest.mark.parametrize(
    "template",
    [
        "newdir",
        "nested/new/dirs",
        "docs/.snodo-like",
        "a/.snodoX",
        "snodo",
        ".snodo-backup",
        "src_link/sub",
        "{root}/absdir",
    ],
)
def test_legitimate_directories(project: Path, workspace: Workspace, template: str) -> None:
    result = workspace.create_directory(_spell(template, project))
    assert result["created"] is True
    assert (project / str(result["path"])).is_dir()
    assert workspace.create_directory(_spell(template, project))["created"] is False


def test_reads_of_governance_state_are_allowed(shared_project: Path) -> None:
    ws = Workspace(shared_project, PathGuard(shared_project, PROTECTED))
    assert ws.read_file(".snodo/protocol.yml") == "protocol_id: p\n"
    assert ws.read_file("link_into_snodo") == "protocol_id: p\n"
    assert ws.read_file("secrets/key.pem") == "KEY\n"
    assert ws.list_files(".snodo") == [".snodo/jobs/j1/spec.md", ".snodo/protocol.yml", ".snodo/state.json"]
