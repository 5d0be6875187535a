"""One exit-code table, followed by every command: 0 done, 1 refused or halted by
governance, 4 could not run, 130 interrupted (``snodo --help`` prints it)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from snodo.cli.main import COMMANDS
from tests.conftest import CliResult, git, make_repo, write_producer_protocol


@pytest.fixture
def repo(tmp_path: Path, snodo_cli: Callable[..., CliResult]) -> Path:
    root = make_repo(tmp_path / "repo")
    assert snodo_cli("init", cwd=root).returncode == 0
    write_producer_protocol(root)
    git(root, "add", "-A")
    git(root, "commit", "-q", "-m", "protocol")
    return root


def test_help_prints_the_table(tmp_path: Path, snodo_cli: Callable[..., CliResult]) -> None:
    text = " ".join(snodo_cli("--help", cwd=tmp_path).stdout.split())
    assert "0 done" in text and "1 refused or halted by governance" in text
    assert "4 could not run" in text and "130 interrupted" in text


@pytest.mark.parametrize("command", sorted(COMMANDS))
def test_an_unknown_option_is_one_line_and_exit_4(
    repo: Path, snodo_cli: Callable[..., CliResult], command: str
) -> None:
    for args in ((command, "--no-such-option"), (command, "--no-such-option", "-v")):
        r = snodo_cli(*args, cwd=repo)
        assert r.returncode == 4, (args, r)
        assert "Traceback" not in r.stderr and "no such option" in r.stderr.lower(), r
        assert len([line for line in r.stderr.splitlines() if line.strip()]) <= 2, r


# (arguments, expected exit code): every command, each error class it can meet.
CASES = [
    (("init",), 4),  # an existing protocol without --force: could not run
    (("protocol", "check", "missing.yml"), 4),
    (("protocol", "check", "broken.yml"), 1),  # the check refused it
    (("plugins", "--json"), 0),
    (("plugin", "new", "nonsense", "x"), 4),
    (("validate",), 4),
    (("validate", "@missing.md"), 4),
    (("authorize", "dec-nope"), 4),
    (("audit", "verify", "missing.log"), 4),
    (("audit", "restart", "--reason", "nothing lost", "--yes"), 4),
    (("keys", "show", "--name", "two words"), 4),
    (("run",), 4),
    (("run", "task", "--mock", "--mode", "nope"), 4),
    (("run", "--resume", "task-nope", "--mock"), 4),
    (("serve", "--mode", "nope"), 4),
    (("session", "show", "sess-nope"), 4),
    (("jobs", "show", "job-nope"), 4),
    (("jobs", "prune", "--older-than", "5x"), 4),
    (("jobs", "prune", "--older-than", "1d"), 0),
    (("doctor", "--json"), None),  # 0 with a sandbox backend, 1 without: both in the table
]


@pytest.mark.parametrize(("args", "code"), CASES, ids=[" ".join(a) for a, _ in CASES])
def test_every_command_follows_the_table(
    repo: Path, snodo_cli: Callable[..., CliResult], args: tuple[str, ...], code: int | None
) -> None:
    (repo / "broken.yml").write_text("protocol_id: [\n")
    r = snodo_cli(*args, cwd=repo, input="")
    assert r.returncode == code if code is not None else r.returncode in (0, 1), r
    assert "Traceback" not in r.stderr
    as_json = snodo_cli(*args, "--json", cwd=repo, input="") if "--json" not in args else r
    if code == 4 and as_json.stdout.strip():
        assert as_json.json()["exit_code"] == 4, as_json


def test_run_outside_a_git_repository_could_not_run(tmp_path: Path, snodo_cli: Callable[..., CliResult]) -> None:
    plain = tmp_path / "plain"
    plain.mkdir()
    assert snodo_cli("init", cwd=plain).returncode == 0
    r = snodo_cli("run", "add a module", "--mock", cwd=plain)
    assert r.returncode == 4 and "git" in r.stderr and "Traceback" not in r.stderr, r


def test_global_options_after_the_command(repo: Path, snodo_cli: Callable[..., CliResult]) -> None:
    quiet = snodo_cli("run", "add a hello module", "--mock", "-q", cwd=repo)
    assert quiet.returncode == 0 and quiet.stderr.strip() == "", quiet
    job = snodo_cli("jobs", "list", "--json", cwd=repo).json()["jobs"][0]["job_id"]
    shown = snodo_cli("jobs", "show", job, "-v", cwd=repo)
    assert shown.returncode == 0 and "Traceback" not in shown.stderr and job in shown.stdout, shown
    before = snodo_cli("--json", "jobs", "show", job, cwd=repo)
    assert before.returncode == 0 and before.json()["job_id"] == job
