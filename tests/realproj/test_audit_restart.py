"""The audit log's life cycle: runtime state in the git directory, and a lost log recoverable
only by a person's recorded act (``snodo audit restart``), never silently."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from tests.conftest import CliResult, git, make_repo, write_producer_protocol


def _project(tmp_path: Path, snodo_cli: Callable[..., CliResult]) -> Path:
    repo = make_repo(tmp_path / "repo")
    assert snodo_cli("init", "--json", cwd=repo).returncode == 0
    write_producer_protocol(repo)
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", "protocol")
    return repo


def test_a_deleted_log_then_restart_records_the_lost_head(tmp_path: Path, snodo_cli: Callable[..., CliResult]) -> None:
    repo = _project(tmp_path, snodo_cli)
    first = snodo_cli("run", "add a hello module", "--mock", "--json", cwd=repo)
    assert first.returncode == 0, first
    log = repo / ".git" / "snodo" / "audit.log"
    assert log.is_file()
    log.unlink()

    refused = snodo_cli("run", "add a hello module", "--mock", cwd=repo)
    assert refused.returncode == 4, refused
    said = " ".join(refused.stderr.split())
    assert "lines were removed" in said and 'snodo audit restart --reason "..."' in said, refused.stderr
    assert "Traceback" not in refused.stderr

    assert snodo_cli("audit", "restart", "--reason", "x", cwd=repo, input="").returncode == 4  # no terminal, no --yes
    restarted = snodo_cli("audit", "restart", "--reason", "the log was deleted", "--yes", "--json", cwd=repo)
    assert restarted.returncode == 0, restarted
    head = restarted.json()["lost_head"]
    assert isinstance(head["seq"], int) and head["seq"] > 0 and len(head["hash"]) == 64
    again = snodo_cli("audit", "restart", "--reason", "again", "--yes", cwd=repo)
    assert again.returncode == 4 and "intact" in again.stderr, again  # nothing to restart now

    second = snodo_cli("run", "add a hello module", "--mock", "--json", cwd=repo)
    assert second.returncode == 0, second
    verify = snodo_cli("audit", "verify", cwd=repo)
    assert verify.returncode == 0, verify
    shown = " ".join(verify.stdout.split())
    assert "restarted at line 1" in shown and f"seq {head['seq']} hash {head['hash']}" in shown, verify.stdout
    assert "the log was deleted" in shown
    as_json = snodo_cli("audit", "verify", "--json", cwd=repo).json()
    assert as_json["ok"] and as_json["restarts"][0]["lost_head"]["hash"] == head["hash"]


def test_a_truncated_log_is_kept_aside_when_restarted(tmp_path: Path, snodo_cli: Callable[..., CliResult]) -> None:
    repo = _project(tmp_path, snodo_cli)
    assert snodo_cli("validate", "add a module", "--json", cwd=repo).returncode == 0
    log = repo / ".git" / "snodo" / "audit.log"
    log.write_bytes(log.read_bytes().splitlines(keepends=True)[0])  # rolled back to its first line
    assert snodo_cli("validate", "add a module", cwd=repo).returncode == 4
    assert snodo_cli("audit", "restart", "--reason", "rolled back", "--yes", cwd=repo).returncode == 0
    kept = list(log.parent.glob("audit.log.lost-*"))
    assert len(kept) == 1 and kept[0].read_bytes().count(b"\n") == 1
    assert snodo_cli("audit", "verify", cwd=repo).returncode == 0
