"""Read-only commands never write: not the audit log, not state, not the repository."""

from __future__ import annotations

import hashlib
from pathlib import Path


def digest(root: Path) -> dict[str, str]:
    return {
        str(p.relative_to(root)): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(root.rglob("*"))
        if p.is_file() and not p.name.endswith(".lock")
    }


def test_listing_and_verifying_write_nothing(git_repo: Path, snodo_cli, snodo_home: Path) -> None:  # type: ignore[no-untyped-def]
    assert snodo_cli("init", cwd=git_repo).returncode == 0
    assert snodo_cli("run", "add a hello module", "--mock", cwd=git_repo).returncode == 0
    before = digest(git_repo), digest(snodo_home)
    session_id = snodo_cli("session", "list", "--json", cwd=git_repo).json()["sessions"][0]["session_id"]
    job_id = snodo_cli("jobs", "list", "--json", cwd=git_repo).json()["jobs"][0]["job_id"]
    for args in (
        ["audit", "verify"],
        ["audit", "verify", "--json"],
        ["audit", "show"],
        ["audit", "show", "--event", "validate", "--last", "1", "--json"],
        ["authorize"],
        ["authorize", "--json"],
        ["session", "list"],
        ["session", "show", session_id],
        ["jobs", "list"],
        ["jobs", "show", job_id, "--log"],
        ["plugins"],
        ["protocol", "check"],
    ):
        r = snodo_cli(*args, cwd=git_repo)
        assert r.returncode == 0, (args, r)
    assert (digest(git_repo), digest(snodo_home)) == before


def test_audit_show_filters(git_repo: Path, snodo_cli) -> None:  # type: ignore[no-untyped-def]
    assert snodo_cli("init", cwd=git_repo).returncode == 0
    assert snodo_cli("validate", "add a hello module", cwd=git_repo).returncode == 0
    shown = snodo_cli("audit", "show", "--event", "validate", "--json", cwd=git_repo).json()["events"]
    assert [e["event"] for e in shown] == ["validate"]
    last = snodo_cli("audit", "show", "--last", "1", "--json", cwd=git_repo).json()["events"]
    assert [e["event"] for e in last] == ["token_issued"]


def test_broken_audit_log_fails_verify_and_refuses_appends(git_repo: Path, snodo_cli) -> None:  # type: ignore[no-untyped-def]
    assert snodo_cli("init", cwd=git_repo).returncode == 0
    assert snodo_cli("validate", "add a hello module", cwd=git_repo).returncode == 0
    log = git_repo / ".git" / "snodo" / "audit.log"
    lines = log.read_text().splitlines()
    at = next(i for i, line in enumerate(lines) if '"validate"' in line)
    lines[at] = lines[at].replace('"validate"', '"validatE"')
    log.write_text("\n".join(lines) + "\n")
    r = snodo_cli("audit", "verify", "--json", cwd=git_repo)
    assert r.returncode == 1 and r.json()["line"] == at + 1, r
    again = snodo_cli("validate", "add a hello module", cwd=git_repo)
    assert again.returncode == 4 and "audit" in again.stderr.lower()
