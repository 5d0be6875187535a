"""What post_execute's validators are told the working copy holds besides the commit they
judge (``details.dirty_tree``, issues 27 and 42).

The copy is restored and checked clean before the run, so pre_execute is told so without
git; post_execute judges a snapshot of the commit the engine just made, HEAD's tree, so
nothing beyond it is seen and no ``git status`` of the copy is needed. Whatever a confined
pre_execute validator changed, under each backend, stays in its own copy. Real CLI, real
git, real sandbox.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import TRIVIAL_PROTOCOL, git, git_on_path, make_repo

#: The trivial protocol, its pre_execute validator running the project's ``pre.sh``.
PROTOCOL = TRIVIAL_PROTOCOL.replace(
    '{validator_id: pre, validator_type: command, tooling: {command: "true"}}',
    '{validator_id: pre, validator_type: command, tooling: {command: "sh pre.sh"}}',
)


def _project(tmp_path: Path, pre: str) -> tuple[Path, dict[str, str], Path]:
    """A project whose pre_execute validator runs ``pre`` (a shell script) in the copy, and
    the environment of a run whose every git process is logged."""
    repo = make_repo(tmp_path / "repo")
    (repo / ".snodo").mkdir()
    (repo / ".snodo" / "protocol.yml").write_text(PROTOCOL)
    (repo / "pre.sh").write_text(pre)
    (repo / "tool.sh").write_text("echo tool\n")
    (repo / "pkg").mkdir()
    (repo / "pkg" / "mod.py").write_text("X = 1\n")
    git(repo, "add", "-A")
    git(repo, "commit", "-qm", "project")
    log = tmp_path / "git.log"
    assert "sh pre.sh" in PROTOCOL
    return repo, git_on_path(tmp_path / "bin", f'printf \'%s\\n\' "$*" >> "{log}"'), log


def _run(repo: Path, env: dict[str, str], log: Path, spec: str) -> tuple[dict, list[str]]:  # type: ignore[type-arg]
    log.unlink(missing_ok=True)
    done = subprocess.run(
        [sys.executable, "-I", "-m", "snodo", "run", spec, "--mock", "--json"],
        cwd=repo,
        env=env,
        capture_output=True,
        text=True,
        timeout=180,
    )
    payload: dict = json.loads(done.stdout)  # type: ignore[type-arg]
    assert payload["status"] == "completed", done.stdout + done.stderr
    return payload, log.read_text().splitlines()


def _post(payload: dict) -> dict:  # type: ignore[type-arg]
    post: dict = next(v for v in payload["validators"] if v["validator_id"] == "post")  # type: ignore[type-arg]
    assert post["severity"] == "pass", post
    return post


def _copy_statuses(lines: list[str]) -> list[str]:
    return [line for line in lines if "/pool/slot-" in line and " status " in f" {line} "]


def test_a_copy_nothing_touched_is_judged_clean(tmp_path: Path, backend: str) -> None:
    repo, env, log = _project(tmp_path, "true\n")
    for n in range(2):  # a copy made fresh, then one restored
        payload, lines = _run(repo, env, log, f"add a hello module {n}")
        assert "dirty_tree" not in _post(payload)["details"]
        assert _copy_statuses(lines) == [], "\n".join(lines)  # none for either phase


@pytest.mark.parametrize(
    "pre",
    [
        "echo left > pkg/left.txt\n",
        "echo more >> README.md\n",
        "mkdir -p pkg/fresh/deeper && echo x > pkg/fresh/deeper/f.txt\n",
        "echo Y = 2 >> pkg/mod.py\n",
        "chmod 755 tool.sh\n",
        "rm pkg/mod.py\n",
    ],
    ids=["untracked", "modified", "new-directory", "modified-below", "mode", "deleted"],
)
def test_what_a_confined_pre_execute_validator_changes_stays_in_its_own_copy(
    tmp_path: Path, backend: str, pre: str
) -> None:
    """A validator judges a private copy of the judged tree (SPEC §3 "One snapshot"): what
    its process writes never reaches the run's working copy, so the commit holds the coder's
    work alone and the copy is clean after it."""
    repo, env, log = _project(tmp_path, pre)
    for n in range(2):  # a copy made fresh, then one restored (the pre_execute script ran again)
        payload, lines = _run(repo, env, log, f"add a hello module {n}")
        assert "dirty_tree" not in _post(payload)["details"], payload
        assert _copy_statuses(lines) == [], "\n".join(lines)
        copies = {m.group(1) for line in lines if (m := re.search(r"(/\S+/pool/slot-\d+)", line))}
        assert copies, "\n".join(lines)
        for copy in copies:  # what the validators were told: nothing beyond the commit
            assert git(Path(copy), "status", "--porcelain", "--ignored") == "", copy
        changed = git(repo, "diff", "--name-only", "HEAD", payload["commit"]).split()
        assert changed and not [p for p in changed if p.startswith(("pkg/", "README", "tool.sh"))], changed
