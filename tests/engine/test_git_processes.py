"""How many git processes a governed `snodo run --mock` starts (#26: fewer processes).

A wrapper named ``git`` first on PATH logs its arguments and execs the real git. snodo finds
its git once, at import, on the PATH it starts with, so the wrapper is in place before the
run starts: every git process of the run (snodo's own, through :mod:`snodo.git.runner`, and any
other) is counted. The first run of a project makes the pooled working copy
(``worktree add``); the second reuses it (``clean`` + ``reset``): the steady state.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from tests.conftest import TRIVIAL_PROTOCOL, git, git_on_path, make_repo

PROTOCOL = TRIVIAL_PROTOCOL

#: What a governed mock run starts: the user's checkout (rev-parse, which also reads HEAD;
#: status; the configuration, asked once per process; on a first run or after HEAD changed,
#: the protocol's history, otherwise kept in ``$SNODO_HOME/cache/git``), the copy restored
#: (``clean`` and ``reset --hard``, or ``worktree add``), per phase the judged tree kept in
#: the git directory brought to the phase's tree (``core.hooksPath`` asked; one ``cat-file
#: --batch`` for the root tree and the blobs that differ; when it held another tree, one
#: ``diff-tree`` and one ``read-tree`` of its index; the first time, one ``ls-tree`` listing it and one
#: ``read-tree`` into a private index; the pre_execute phase names its tree with a ``rev-parse``), the engine's
#: commit (update-index, write-tree, commit-tree), its diff, one ``status`` of the copy for
#: the post_execute phase, the branch and the note. The budgets are the measured counts.
STATUS_PER_PHASE = 1
STEADY_BUDGET = 19
FIRST_BUDGET = 22


def _governed_run(repo: Path, env: dict[str, str], log: Path, n: int) -> list[str]:
    log.unlink(missing_ok=True)
    done = subprocess.run(
        [sys.executable, "-I", "-m", "snodo", "run", f"add a hello module {n}", "--mock", "--json"],
        cwd=repo,
        env=env,
        capture_output=True,
        text=True,
        timeout=180,
    )
    assert json.loads(done.stdout)["status"] == "completed", done.stdout + done.stderr
    return log.read_text().splitlines()


def test_a_mock_run_starts_few_git_processes(tmp_path: Path, snodo_home: Path) -> None:
    log = tmp_path / "git.log"
    repo = make_repo(tmp_path / "repo")
    (repo / ".snodo").mkdir()
    (repo / ".snodo" / "protocol.yml").write_text(PROTOCOL)
    git(repo, "add", ".snodo")
    git(repo, "commit", "-q", "-m", "protocol")
    env = {**git_on_path(tmp_path / "bin", f'printf \'%s\\n\' "$*" >> "{log}"'), "SNODO_HOME": str(snodo_home)}

    first = _governed_run(repo, env, log, 1)
    second = _governed_run(repo, env, log, 2)

    shown = "\n".join(second)
    assert any(" worktree add " in f" {line} " for line in first), first  # the wrapper saw the copy made
    assert not any(" worktree add " in f" {line} " for line in second), shown  # and then reused
    assert len(first) <= FIRST_BUDGET, "\n".join(first)
    assert len(second) <= STEADY_BUDGET, shown
    statuses = [line for line in second if line.endswith(" status --ignore-submodules=all --porcelain")]
    assert len(statuses) <= STATUS_PER_PHASE, statuses
    # The run's evidence is still written: the note on the completed branch's commit.
    notes = git(repo, "notes", "--ref=refs/notes/snodo", "list").split()
    assert len(notes) == 2 * 2  # (note, commit) per completed run
