"""With --json, every command prints exactly one JSON object on stdout, whatever happens:
success, bad arguments, no project, a broken protocol, an unknown id. Errors are
``{error, hint, exit_code}`` with ``exit_code`` the process's exit status."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import CliResult, make_repo

FRIENDLY = "Add a greeting module.\n\nAcceptance criteria:\n- the greeting sounds friendly\n"

#: every command that takes --json, with arguments that succeed in a fresh project
SUCCEEDS: dict[str, tuple[str, ...]] = {
    "protocol check": ("protocol", "check"),
    "plugins": ("plugins",),
    "validate": ("validate", "add a hello module"),
    "authorize": ("authorize",),
    "audit verify": ("audit", "verify"),
    "audit show": ("audit", "show"),
    "session list": ("session", "list"),
    "jobs list": ("jobs", "list"),
    "run": ("run", "add a hello module", "--mock"),
}

#: commands that need a project, and so must answer in JSON outside one
NEED_A_PROJECT: dict[str, tuple[str, ...]] = {
    "protocol check": ("protocol", "check"),
    "validate": ("validate", "x"),
    "run": ("run", "x", "--mock"),
    "authorize": ("authorize",),
    "audit verify": ("audit", "verify"),
    "audit show": ("audit", "show"),
    "session list": ("session", "list"),
    "jobs list": ("jobs", "list"),
    "jobs show": ("jobs", "show", "job-x"),
}

ALL_JSON_COMMANDS = (
    ("init",),
    ("protocol", "check"),
    ("plugins",),
    ("validate", "x"),
    ("run", "x"),
    ("authorize",),
    ("audit", "verify"),
    ("audit", "show"),
    ("session", "list"),
    ("session", "show", "s"),
    ("jobs", "list"),
    ("jobs", "show", "j"),
)


def one_object(r: CliResult) -> dict[str, Any]:
    """stdout is exactly one JSON object (json.loads refuses trailing data)."""
    value = json.loads(r.stdout)
    assert isinstance(value, dict), r
    assert "Traceback" not in r.stderr, r
    return value


def an_error(r: CliResult, code: int | None = None) -> dict[str, Any]:
    obj = one_object(r)
    assert {"error", "hint", "exit_code"} <= set(obj), r
    assert obj["exit_code"] == r.returncode != 0, r
    assert isinstance(obj["error"], str) and obj["error"], r
    if code is not None:
        assert r.returncode == code, r
    return obj


@pytest.fixture
def project(tmp_path: Path, snodo_cli: Callable[..., CliResult]) -> Path:
    repo = make_repo(tmp_path / "repo")
    r = snodo_cli("init", "--template", "solo", "--json", cwd=repo)
    assert r.returncode == 0 and one_object(r)["initial_mode"] == "producer", r
    return repo


@pytest.mark.slow
def test_success_prints_one_object_for_every_command(project: Path, snodo_cli: Callable[..., CliResult]) -> None:
    for name, args in SUCCEEDS.items():
        r = snodo_cli(*args, "--json", cwd=project)
        assert r.returncode == 0, (name, r)
        assert "error" not in one_object(r), (name, r)
    job = snodo_cli("jobs", "list", "--json", cwd=project).json()["jobs"][0]["job_id"]
    shown = one_object(snodo_cli("jobs", "show", job, "--log", "--json", cwd=project))
    assert shown["job_id"] == job and isinstance(shown["log"], str) and shown["log"]
    session = snodo_cli("session", "list", "--json", cwd=project).json()["sessions"][0]["session_id"]
    assert one_object(snodo_cli("session", "show", session, "--json", cwd=project))["session_id"] == session
    esc = snodo_cli("validate", "-", "--phase", "post_execute", "--json", cwd=project, input=FRIENDLY)
    assert esc.returncode == 2 and "authorize" in one_object(esc)["instruction"]
    unattended = an_error(snodo_cli("authorize", esc.json()["decision_id"], "--json", cwd=project))
    assert "--yes" in unattended["hint"]  # no terminal to confirm on: refused, never assumed
    signed = snodo_cli("authorize", esc.json()["decision_id"], "--yes", "--json", cwd=project)
    assert signed.returncode == 0 and one_object(signed)["decision"] == "approve", signed
    background = snodo_cli("run", "add a goodbye module", "--mock", "--background", "--json", cwd=project)
    assert one_object(background)["status"] == "accepted", background


@pytest.mark.slow
def test_bad_arguments_answer_in_json_with_exit_4(tmp_path: Path, snodo_cli: Callable[..., CliResult]) -> None:
    for args in ALL_JSON_COMMANDS:
        r = snodo_cli(*args, "--json", "--no-such-option", cwd=tmp_path)
        obj = an_error(r, 4)
        assert "--no-such-option" in obj["error"] and "--help" in obj["hint"], r
    bad_value = an_error(snodo_cli("audit", "show", "--last", "0", "--json", cwd=tmp_path), 4)
    assert "--last" in bad_value["error"]
    missing = an_error(snodo_cli("jobs", "show", "--json", cwd=tmp_path), 4)
    assert "JOB_ID" in missing["error"]
    # a command that has no --json still answers a script that asked for JSON
    an_error(snodo_cli("serve", "--json", cwd=tmp_path), 4)
    an_error(snodo_cli("no-such-command", "--json", cwd=tmp_path), 4)


@pytest.mark.slow
def test_outside_a_project_every_command_answers_in_json(tmp_path: Path, snodo_cli: Callable[..., CliResult]) -> None:
    nowhere = tmp_path / "not-a-project"
    nowhere.mkdir()
    for name, args in NEED_A_PROJECT.items():
        r = snodo_cli(*args, "--json", cwd=nowhere)
        obj = an_error(r)
        assert "no protocol file" in obj["error"], (name, r)
        if name in ("run", "validate", "audit verify"):
            assert r.returncode == 4, (name, r)
    an_error(snodo_cli("init", "--dir", str(nowhere / "missing"), "--json", cwd=nowhere))


@pytest.mark.slow
def test_a_broken_protocol_answers_in_json(project: Path, snodo_cli: Callable[..., CliResult]) -> None:
    (project / ".snodo" / "protocol.yml").write_text("modes: [\n")
    for args in (("validate", "x"), ("run", "x", "--mock"), ("protocol", "check")):
        r = snodo_cli(*args, "--json", cwd=project)
        obj = an_error(r, 1 if args[0] == "protocol" else 4)
        assert "YAML" in json.dumps(obj), r
        assert "docs/protocol.md" in (obj["hint"] or ""), r
    # the same failure for a person: one message on stderr, nothing on stdout
    person = snodo_cli("run", "x", "--mock", cwd=project)
    assert person.returncode == 4 and person.stdout == "" and "error:" in person.stderr


@pytest.mark.slow
def test_unknown_ids_answer_in_json(project: Path, snodo_cli: Callable[..., CliResult]) -> None:
    cases = {
        ("jobs", "show", "job-nope"): "job-nope",
        ("session", "show", "sess-nope"): "sess-nope",
        ("authorize", "dec-nope", "--yes"): "dec-nope",
        ("run", "--resume", "task-nope"): "task-nope",
    }
    for args, named in cases.items():
        r = snodo_cli(*args, "--json", cwd=project)
        obj = an_error(r)
        assert named in obj["error"], r
    assert snodo_cli("run", "--resume", "task-nope", "--json", cwd=project).returncode == 4
