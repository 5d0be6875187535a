"""Specs starting with @, progress on stderr (and --quiet), text that speaks to the person,
and a background job's log with each line once."""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path

import pytest

from snodo.rules.taskids import derive_task_id
from tests.conftest import CliResult


def test_at_at_escapes_a_literal_at(project: Path, snodo_cli: Callable[..., CliResult]) -> None:
    literal = snodo_cli("validate", "@@mention the team in the README", "--json", cwd=project)
    assert literal.returncode == 0, literal
    assert literal.json()["task_id"] == derive_task_id("@mention the team in the README")

    (project / "task.md").write_text("add a hello module\n")
    from_file = snodo_cli("validate", "@task.md", "--json", cwd=project)
    assert from_file.json()["task_id"] == derive_task_id("add a hello module\n")

    missing = snodo_cli("validate", "@mention the team", cwd=project)
    assert missing.returncode == 4 and "cannot read the spec file" in missing.stderr
    assert "@@" in missing.stderr  # the escape is offered where the mistake happens

    stdin = snodo_cli("validate", "-", "--json", cwd=project, input="@stdin is read literally\n")
    assert stdin.json()["task_id"] == derive_task_id("@stdin is read literally\n")

    for command in ("run", "validate"):
        helptext = snodo_cli(command, "--help", cwd=project).stdout
        assert "@@text" in helptext and "@FILE" in helptext and "stdin" in helptext, helptext


def test_progress_goes_to_stderr_and_quiet_silences_it(project: Path, snodo_cli: Callable[..., CliResult]) -> None:
    r = snodo_cli("validate", "add a hello module", cwd=project)
    assert r.returncode == 0, r
    assert "pre_execute: running" in r.stderr and "pre_execute: running" not in r.stdout
    assert "next: `snodo run 'add a hello module'`" in r.stdout
    assert "dispatch_task" not in r.stdout  # an agent's instruction, not the person's
    assert "dispatch_task" in snodo_cli("validate", "add a hello module", "--json", cwd=project).json()["instruction"]

    quiet = snodo_cli("-q", "validate", "add a hello module", cwd=project)
    assert quiet.returncode == 0 and quiet.stderr == "", quiet
    assert quiet.stdout == r.stdout

    quiet_json = snodo_cli("--quiet", "validate", "add a hello module", "--json", cwd=project)
    assert quiet_json.stderr == "" and quiet_json.json()["status"] == "pass"


@pytest.mark.slow
def test_run_progress_and_a_background_log_without_doubled_lines(
    project: Path, snodo_cli: Callable[..., CliResult]
) -> None:
    fg = snodo_cli("run", "add a hello module", "--mock", cwd=project)
    assert fg.returncode == 0, fg
    assert "post_execute: running tests (pytest)" in fg.stderr and "s · " in fg.stderr
    assert "post_execute: running" not in fg.stdout

    started = snodo_cli("run", "add a goodbye module", "--mock", "--background", "--json", cwd=project)
    job = started.json()["job_id"]
    deadline = time.monotonic() + 120
    while snodo_cli("jobs", "show", job, "--json", cwd=project).json()["status"] in ("queued", "running"):
        assert time.monotonic() < deadline
        time.sleep(0.5)
    log = snodo_cli("jobs", "show", job, "--log", cwd=project)
    assert log.returncode == 0
    lines = log.stdout.splitlines()
    assert lines.count("pre_execute validation") == 1, log.stdout
    assert not log.stdout.lstrip().startswith("{")  # text, not JSON


def test_control_sequences_in_a_spec_are_shown_not_obeyed(project: Path, snodo_cli: Callable[..., CliResult]) -> None:
    hostile = "Add a module.\x1b]0;owned\x07\x1b[2J\n\nAcceptance criteria:\n- it reads nicely\n"
    esc = snodo_cli("validate", "-", "--phase", "post_execute", "--json", cwd=project, input=hostile)
    assert esc.returncode == 2, esc
    decision = esc.json()["decision_id"]
    for args in (("authorize",), ("authorize", decision, "--reject", "--yes")):
        r = snodo_cli(*args, cwd=project)
        assert r.returncode == 0, r
        assert "\x1b" not in r.stdout and "\x07" not in r.stdout, r
        assert "\\x1b]0;owned\\x07" in r.stdout, r  # visible, so the person sees the attempt
    shown = snodo_cli("authorize", decision, "--yes", cwd=project)  # already decided: refused
    assert "\x1b" not in shown.stdout + shown.stderr
    listing = snodo_cli("validate", "-", "--phase", "post_execute", cwd=project, input=hostile)
    assert "\x1b" not in listing.stdout


@pytest.mark.parametrize("terminal", ["1", "0"])
def test_a_progress_line_carrying_agent_text_is_shown_not_obeyed(
    terminal: str, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """A coder's log line or a refused path reaches the progress stream; on a terminal (rich)
    as off it (plain), its control sequences are shown as text, never sent to the terminal."""
    from snodo.cli.output import Progress

    monkeypatch.setenv("TTY_COMPATIBLE", terminal)
    monkeypatch.delenv("NO_COLOR", raising=False)
    Progress()("coder: evil\x1bc\x1b]0;owned\x07\x1b[2J[bold]done[/]")
    err = capsys.readouterr().err
    assert "\\x1bc\\x1b]0;owned\\x07\\x1b[2J" in err, repr(err)
    assert "[bold]done[/]" in err, repr(err)  # markup in agent text is text too
    if terminal == "1":
        assert "\x1b[" in err, repr(err)  # rich styled the line: the terminal path was taken
    assert "\x1bc" not in err and "\x07" not in err and "\x1b]" not in err and "\x1b[2J" not in err, repr(err)
