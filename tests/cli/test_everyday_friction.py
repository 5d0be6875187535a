"""Everyday friction at the command line, each case driven through the real ``snodo``
process in a real git repository."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from snodo.state.audit import AuditLog
from tests.conftest import TRIVIAL_PROTOCOL, CliResult, git, make_repo


@pytest.fixture
def trivial(tmp_path: Path) -> Path:
    """A repository whose committed protocol is :data:`TRIVIAL_PROTOCOL`."""
    repo = make_repo(tmp_path / "repo")
    (repo / ".snodo").mkdir()
    (repo / ".snodo" / "protocol.yml").write_text(TRIVIAL_PROTOCOL)
    git(repo, "add", ".snodo")
    git(repo, "commit", "-q", "-m", "protocol")
    return repo


#: tooling that used to pass `protocol check` and fail only when the validator ran
BAD_TOOLING = {
    "{command: 42}": "expected a command",
    '{command: "true && echo hi"}': "&& would be passed literally",
    '{command: "true | cat"}': "| would be passed literally",
    '{command: "echo $(id)"}': "$(id) would be passed literally",
    "{command: [echo, 3]}": "expected a command",
    '{command: "echo \'open"}': "cannot be parsed",
}


@pytest.mark.parametrize("tooling", BAD_TOOLING)
def test_protocol_check_refuses_a_command_that_could_not_run(
    tooling: str, trivial: Path, snodo_cli: Callable[..., CliResult]
) -> None:
    protocol = trivial / ".snodo" / "protocol.yml"
    protocol.write_text(TRIVIAL_PROTOCOL.replace('tooling: {command: "true"}}', f"tooling: {tooling}}}", 1))
    r = snodo_cli("protocol", "check", cwd=trivial)
    assert r.returncode == 1, r
    line = next(n for n, text in enumerate(protocol.read_text().splitlines(), 1) if tooling in text)
    problem = f"{protocol}:{line}: validator 'pre' (type command): tooling.command: "
    assert problem in r.stderr and BAD_TOOLING[tooling] in r.stderr, r
    assert "@ validators[0].tooling.command" in r.stderr, r
    # every load refuses it the same way, before any validator runs
    git(trivial, "commit", "-q", "-am", "a command that cannot run")
    v = snodo_cli("validate", "x", cwd=trivial)
    assert v.returncode == 4 and problem in v.stderr, v


def test_protocol_check_refuses_a_non_path_pythonpath_and_a_string_for_a_list(
    trivial: Path, snodo_cli: Callable[..., CliResult]
) -> None:
    protocol = trivial / ".snodo" / "protocol.yml"
    protocol.write_text(
        TRIVIAL_PROTOCOL
        + "  - {validator_id: t, validator_type: pytest, evaluation_phase: post_execute,"
        + " tooling: {pythonpath: 42, plugins: pytest-xdist}}\n"
    )
    r = snodo_cli("protocol", "check", "--json", cwd=trivial)
    assert r.returncode == 1, r
    errors = [e["message"] for e in r.json()["errors"]]
    assert any(f"{protocol}:" in e and "tooling.pythonpath: expected a path or a list of paths" in e for e in errors), r
    assert any("tooling.plugins: expected a list of strings, got str 'pytest-xdist'" in e for e in errors), r
    # what a command may be: a string or a list, without shell syntax
    protocol.write_text(
        TRIVIAL_PROTOCOL
        + "  - {validator_id: t, validator_type: pytest, evaluation_phase: post_execute,"
        + " tooling: {command: [python, -m, pytest, -q], pythonpath: src}}\n"
    )
    assert snodo_cli("protocol", "check", cwd=trivial).returncode == 0


@pytest.mark.parametrize(
    "value",
    [
        "python -m pytest -q",
        ["python", "-m", "pytest"],
        "",
        [],
        42,
        ["a", 3],
        "a && b",
        "a|b",
        "a | b",
        "x; y",
        "echo `id`",
        "echo $(id)",
        "a 2>&1",
        "'open",
        "a > out",
        "true",
    ],
)
def test_the_command_kind_refuses_what_the_judge_would(value: object) -> None:
    """The loader's check and the judge's parser agree on every command."""
    from snodo.api import Setting, TestJudgement, ValidatorFault

    try:
        TestJudgement.command_argv(value)
        runs = True
    except ValidatorFault:
        runs = False
    assert (Setting("command", "command").problem(value) is None) == runs


def test_bare_jobs_lists_the_jobs(trivial: Path, snodo_cli: Callable[..., CliResult]) -> None:
    run = snodo_cli("run", "add a hello module", "--mock", "--json", cwd=trivial)
    assert run.returncode == 0, run
    listed = snodo_cli("jobs", "list", cwd=trivial)
    bare = snodo_cli("jobs", cwd=trivial)
    assert bare.returncode == 0 and "Usage:" not in bare.stdout, bare
    assert bare.stdout == listed.stdout and run.json()["job_id"] in bare.stdout, bare
    for args in (("jobs", "--json"), ("--json", "jobs")):
        as_json = snodo_cli(*args, cwd=trivial)
        assert as_json.returncode == 0 and as_json.json() == snodo_cli("jobs", "list", "--json", cwd=trivial).json()


def test_quiet_silences_progress_and_notices_but_not_errors(
    tmp_path: Path, snodo_cli: Callable[..., CliResult]
) -> None:
    trivial = make_repo(tmp_path / "fresh")
    (trivial / ".snodo").mkdir()
    (trivial / ".snodo" / "protocol.yml").write_text(TRIVIAL_PROTOCOL)  # never committed: a note says so
    loud = snodo_cli("protocol", "check", cwd=trivial)
    assert loud.returncode == 0 and "note:" in loud.stderr, loud  # the working tree is in force until committed
    for args in (
        ("protocol", "check"),
        ("keys", "show"),
        ("validate", "x"),
        ("serve", "--print-config", "opencode"),
        ("jobs",),
    ):
        for quiet in (("-q", *args), (*args, "-q")):
            r = snodo_cli(*quiet, cwd=trivial)
            assert r.returncode == 0 and r.stderr == "", (quiet, r)
    failed = snodo_cli("-q", "jobs", "show", "job-nope", cwd=trivial)
    assert failed.returncode == 4 and "error:" in failed.stderr, failed


def test_the_confinement_note_only_where_confinement_is_reported(
    trivial: Path, snodo_cli: Callable[..., CliResult]
) -> None:
    checked = snodo_cli("protocol", "check", cwd=trivial)
    for args in (("validate", "x"), ("jobs",), ("session", "list"), ("audit", "verify"), ("keys", "show")):
        r = snodo_cli(*args, cwd=trivial)
        assert "confinement" not in r.stderr, (args, r)
    for args in (("-q", "protocol", "check"), ("protocol", "check", "--json")):
        r = snodo_cli(*args, cwd=trivial)
        assert r.returncode == 0 and "confinement" not in r.stderr, (args, r)
    gaps = snodo_cli("protocol", "check", "--json", cwd=trivial).json()["confinement"]["not_guaranteed"]
    assert checked.stderr.count("does not guarantee") == len(gaps), checked


#: every command with arguments that answer fast outside a project (mostly with an error)
JSON_ARGS: dict[tuple[str, ...], tuple[str, ...]] = {
    ("attest", "show"): ("HEAD",),
    ("audit", "export"): (),
    ("audit", "restart"): (),
    ("audit", "show"): (),
    ("audit", "verify"): (),
    ("authorize",): (),
    ("doctor",): (),
    ("init",): ("--dir", "missing"),
    ("jobs",): (),
    ("jobs", "list"): (),
    ("jobs", "prune"): (),
    ("jobs", "show"): ("job-x",),
    ("keys", "protect"): (),
    ("keys", "show"): (),
    ("plugin", "new"): ("validator", "bad name!"),
    ("plugins",): (),
    ("protocol", "check"): (),
    ("protocol", "sign"): (),
    ("push",): (),
    ("run",): ("x", "--mock"),
    ("session", "close"): ("s",),
    ("session", "list"): (),
    ("session", "show"): ("s",),
    ("validate",): ("x",),
    ("verify",): (),
}


def test_every_command_takes_json_before_and_after(tmp_path: Path, snodo_cli: Callable[..., CliResult]) -> None:
    import click

    from snodo.cli.main import cli

    ctx = click.Context(cli)
    leaves: list[tuple[str, ...]] = []

    def walk(command: click.Command, path: tuple[str, ...]) -> None:
        if isinstance(command, click.Group):
            if command.invoke_without_command:
                leaves.append(path)
            for name in command.list_commands(ctx):
                sub = command.get_command(ctx, name)
                assert sub is not None
                walk(sub, (*path, name))
        else:
            leaves.append(path)

    walk(cli, ())
    # serve's stdout is the MCP stream; demo takes --json and is too slow to run three times here
    assert set(leaves) - {("serve",), ("demo",)} == set(JSON_ARGS), set(leaves) ^ set(JSON_ARGS)
    nowhere = tmp_path / "nowhere"
    nowhere.mkdir()
    for path, args in JSON_ARGS.items():
        spellings = [("--json", *path, *args), (*path, *args, "--json"), (*path, "--json", *args)]
        if len(path) == 2:
            spellings.append((path[0], "--json", path[1], *args))
        answers = []
        for argv in spellings:
            r = snodo_cli(*argv, cwd=nowhere, input="")
            obj = r.json()
            assert isinstance(obj, dict) and "No such option" not in str(obj.get("error")), (argv, r)
            assert obj.get("exit_code", 0) == r.returncode, (argv, r)
            answers.append(sorted(obj))
        assert all(a == answers[0] for a in answers), (path, answers)


def test_demo_answers_one_json_object_with_its_walk_through_on_stderr(
    tmp_path: Path, snodo_cli: Callable[..., CliResult]
) -> None:
    r = snodo_cli("demo", "--json", "--dir", str(tmp_path / "demo"), cwd=tmp_path)
    assert r.returncode == 0 and r.json()["completed"] is True and r.json()["steps"] > 0, r
    assert "snodo run" in r.stderr, r


def test_redirected_output_is_plain_unwrapped_lines(tmp_path: Path, snodo_cli: Callable[..., CliResult]) -> None:
    deep = make_repo(tmp_path / ("a-directory-with-a-long-name-" * 4) / "repo")
    (deep / ".snodo").mkdir()
    (deep / ".snodo" / "protocol.yml").write_text(TRIVIAL_PROTOCOL)
    git(deep, "add", ".snodo")
    git(deep, "commit", "-q", "-m", "protocol")
    narrow = {"COLUMNS": "80"}  # what rich assumes for a pipe
    run = snodo_cli("run", "add a hello module", "--mock", "--json", cwd=deep)
    job = run.json()["job_id"]
    outputs = {
        args: snodo_cli(*args, cwd=deep, env=narrow)
        for args in (("jobs", "show", job), ("jobs",), ("plugins",), ("validate", "x"), ("session", "list"))
    }
    for args, r in outputs.items():
        assert r.returncode == 0, (args, r)
        assert not set("┏┃━│─╭") & set(r.stdout), (args, r)  # no table drawn for a pipe
    log_line = next(line for line in outputs[("jobs", "show", job)].stdout.splitlines() if line.startswith("log"))
    assert Path(log_line.split()[-1]).is_file() and job in log_line, outputs
    listed = outputs[("jobs",)].stdout.splitlines()
    assert listed[0].split() == ["job", "task", "status", "outcome", "mode", "created"]
    assert any(line.startswith(job) for line in listed), listed


@pytest.fixture
def with_remote(tmp_path: Path) -> tuple[Path, Path]:
    """A repository (no attestations yet) and a bare ``origin``."""
    repo = make_repo(tmp_path / "work")
    server = tmp_path / "server.git"
    git(tmp_path, "init", "-q", "--bare", str(server))
    git(repo, "remote", "add", "origin", str(server))
    return repo, server


def test_a_first_push_without_attestations_pushes_the_branch(
    with_remote: tuple[Path, Path], snodo_cli: Callable[..., CliResult]
) -> None:
    repo, server = with_remote
    r = snodo_cli("push", cwd=repo)
    assert r.returncode == 0 and "no attestations to push" in r.stdout, r
    assert git(server, "rev-parse", "refs/heads/main") == git(repo, "rev-parse", "HEAD")
    as_json = snodo_cli("push", "--json", cwd=repo)
    assert as_json.returncode == 0 and as_json.json()["branch"] == "main", as_json


def test_a_push_the_remote_refuses_is_a_refusal_in_plain_words(
    with_remote: tuple[Path, Path], snodo_cli: Callable[..., CliResult]
) -> None:
    repo, server = with_remote
    hook = server / "hooks" / "pre-receive"
    hook.write_text("#!/bin/sh\necho 'commit abc has no attestation' >&2\nexit 1\n")
    hook.chmod(0o755)
    r = snodo_cli("push", cwd=repo)
    assert r.returncode == 1, r
    first = r.stderr.splitlines()[0]
    assert first.startswith("error: origin refused refs/heads/main: "), r
    assert "commit abc has no attestation" in first and "git -c" not in r.stderr and "remote:" not in first, r
    as_json = snodo_cli("push", "--json", cwd=repo)
    assert as_json.returncode == 1 and as_json.json()["exit_code"] == 1, as_json


def test_outside_a_repository_verify_push_and_attest_say_so(
    tmp_path: Path, snodo_cli: Callable[..., CliResult]
) -> None:
    nowhere = tmp_path / "not-a-repository"
    nowhere.mkdir()
    for args in (("verify",), ("verify", "main..HEAD"), ("push",), ("attest", "show", "HEAD")):
        r = snodo_cli(*args, cwd=nowhere)
        assert r.returncode == 4 and r.stdout == "", (args, r)
        assert r.stderr.splitlines()[0] == f"error: {nowhere} is not inside a git repository", (args, r)
        assert "fatal:" not in r.stderr and "upstream" not in r.stderr, (args, r)
        as_json = snodo_cli(*args, "--json", cwd=nowhere).json()
        assert as_json["exit_code"] == 4 and str(nowhere) in as_json["error"] and as_json["hint"], (args, as_json)


def test_a_post_execute_pass_says_no_token_was_issued(trivial: Path, snodo_cli: Callable[..., CliResult]) -> None:
    post = snodo_cli("validate", "x", "--phase", "post_execute", "--json", cwd=trivial).json()
    assert post["status"] == "pass" and post["token_issued"] is False, post
    assert "token was recorded" not in post["instruction"], post
    assert "post_execute validators" in post["instruction"] and "No token" in post["instruction"], post
    pre = snodo_cli("validate", "x", "--json", cwd=trivial).json()  # a pre_execute pass does record one
    assert pre["token_issued"] is True and "token was recorded" in pre["instruction"], pre


def _author_and_committer(repo: Path, rev: str) -> str:
    return git(repo, "log", "-1", "--format=%an <%ae> | %cn <%ce>", rev).strip()


def test_governed_commits_take_author_and_committer_as_git_would(
    trivial: Path, snodo_cli: Callable[..., CliResult]
) -> None:
    people = {
        "GIT_AUTHOR_NAME": "Ada Author",
        "GIT_AUTHOR_EMAIL": "ada@example.org",
        "GIT_COMMITTER_NAME": "Cy Committer",
        "GIT_COMMITTER_EMAIL": "cy@example.org",
    }
    from_env = snodo_cli("run", "add a hello module", "--mock", "--json", cwd=trivial, env=people)
    assert from_env.returncode == 0, from_env
    branch = from_env.json()["branch"]
    assert _author_and_committer(trivial, branch) == "Ada Author <ada@example.org> | Cy Committer <cy@example.org>"
    # without them, the repository's configuration, as for any git commit
    from_config = snodo_cli("run", "add a goodbye module", "--mock", "--json", cwd=trivial)
    assert from_config.returncode == 0, from_config
    assert _author_and_committer(trivial, from_config.json()["branch"]) == (
        "Dev <dev@example.com> | Dev <dev@example.com>"
    )


def test_a_long_failing_verdict_keeps_its_tally_in_text_output(
    tmp_path: Path, snodo_cli: Callable[..., CliResult]
) -> None:
    """The table used to keep only the tail of a long justification: with many failing tests
    the summary and pytest's tally ("40 failed, 30 passed") were cut off the front."""
    from tests.conftest import write_producer_protocol

    repo = make_repo(tmp_path / "repo")
    (repo / "tests").mkdir()
    for i in range(40):
        (repo / "tests" / f"test_legacy_{i}.py").write_text(
            f"import pathlib\n\n\ndef test_legacy_{i}():\n    assert not pathlib.Path('hello.py').exists()\n"
        )
    for i in range(30):
        (repo / "tests" / f"test_ok_{i}.py").write_text(f"def test_ok_{i}():\n    assert True\n")
    write_producer_protocol(repo)
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", "tests and protocol")
    run = snodo_cli("run", "add a hello module", "--mock", cwd=repo)
    assert run.returncode == 1, run
    table = run.stdout[run.stdout.index("justification") :]
    assert "30 of 70 base-passing test(s) pass (40 failed, 30 passed)" in table, table
    assert "and 20 more" in table and "snodo jobs show" in table, table  # the tail, and where the rest is


def test_a_prose_criterion_without_a_model_asks_a_person_once_after_the_work(
    tmp_path: Path, snodo_cli: Callable[..., CliResult]
) -> None:
    """The solo template judges criteria before and after the work; with no model, a prose
    criterion is one question for a person, after the work — not a second one before it,
    when there is nothing to look at yet."""
    repo = make_repo(tmp_path / "repo")
    assert snodo_cli("init", "--template", "solo", cwd=repo).returncode == 0
    git(repo, "add", ".snodo")
    git(repo, "commit", "-q", "-m", "protocol")
    spec = "add a hello module\n\nAcceptance criteria:\n- the greeting is friendly and polite\n"
    run = snodo_cli("run", spec, "--mock", "--json", cwd=repo)
    payload = run.json()
    assert (payload["outcome"], payload["phase"]) == ("escalate", "post_execute"), payload
    (acceptance,) = [v for v in payload["validators"] if v["validator_id"] == "acceptance"]
    assert "the greeting is friendly and polite (prose criterion and no model" in acceptance["justification"]
    log = AuditLog(repo / ".git" / "snodo" / "audit.log")
    escalated = [e["data"]["phase"] for e in log.records("escalated")]
    assert escalated == ["post_execute"], escalated  # one question for a person, after the work
    (before,) = [e["data"] for e in log.records("validate") if e["data"]["phase"] == "pre_execute"]
    assert before["status"] == "pass", before
    (criteria,) = [r for r in before["results"] if r["validator_id"] == "criteria"]
    assert "not judged before the work: the greeting is friendly and polite" in criteria["justification"], criteria
