"""Fixtures shared by the whole suite: an isolated $SNODO_HOME, real git repositories, the CLI
run as a real subprocess."""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import shutil
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")

REPO = Path(__file__).resolve().parent.parent


@pytest.hookimpl(optionalhook=True)  # a hook of pytest-xdist: unknown (and unused) without it
def pytest_xdist_auto_num_workers(config: pytest.Config) -> int:
    """``-n auto``: two workers per CPU, at most eight. Most of a test's time here is spent
    waiting on a real child (bubblewrap, git, a pytest run, a job), so one worker per core
    leaves the cores idle; more than eight only adds contention on small CI machines."""
    cpus = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)
    return max(2, min(2 * cpus, 8))


@pytest.fixture(autouse=True)
def _isolated_home(tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """No test ever reads or writes the real ~/.snodo."""
    home = tmp_path_factory.mktemp("snodo-home")
    monkeypatch.setenv("SNODO_HOME", str(home))
    monkeypatch.setenv("LITELLM_LOCAL_MODEL_COST_MAP", "True")
    yield home


@pytest.fixture
def snodo_home(_isolated_home: Path) -> Path:
    return _isolated_home


def git(cwd: Path, *args: str) -> str:
    return subprocess.run(["git", "-C", str(cwd), *args], check=True, capture_output=True, text=True).stdout


#: A trivial governed run: the mock coder, a pre_execute and a post_execute validator running ``true``.
TRIVIAL_PROTOCOL = """\
protocol_id: t
name: t
modes:
  - mode_id: producer
    tools: [read, edit, validate, dispatch, commit]
    validators: [pre, post]
    coder: mock
validators:
  - {validator_id: pre, validator_type: command, tooling: {command: "true"}}
  - {validator_id: post, validator_type: command, evaluation_phase: post_execute, tooling: {command: "true"}}
"""


def judge_prose_only_before(repo: Path) -> None:
    """The solo protocol at ``repo`` without the acceptance validator after the work: with no
    model, a prose criterion is then "not verified" before the work (a warn), its one chance to
    reach a person — an escalation at ``pre_execute``, where a decision is bound to the task
    and spec, not to a tree."""
    path = repo / ".snodo" / "protocol.yml"
    solo = "validators: [scope, criteria, tests, acceptance]"
    assert solo in path.read_text(), "not the solo template's producer mode"
    path.write_text(path.read_text().replace(solo, "validators: [scope, criteria, tests]"))


#: A test that passes at the base and fails once the mock coder's ``hello`` module exists:
#: judged against the base, only a test the work breaks can stop it.
BROKEN_BY_HELLO = "import pathlib\n\n\ndef test_legacy():\n    assert not pathlib.Path('hello.py').exists(), 'legacy'\n"

#: The global constraint that discards a run's work when it holds a secret.
NO_SECRETS = "global_constraints:\n  - {constraint_id: no-secrets, predicate: no_secrets_in_diff}\n"


def write_producer_protocol(repo: Path, *, coder_config: str = "{}", tests_extra: str = "", tail: str = "") -> None:
    """The engine tests' protocol: one producer mode (mock coder, ``coder_config`` as YAML
    flow text), a pre_execute ``protocol`` validator and a post_execute ``pytest`` one
    (``tests_extra`` is appended to its mapping, e.g. ``", severity_cap: warn"``), then
    ``tail`` (top-level YAML such as ``execution:`` or ``NO_SECRETS``)."""
    (repo / ".snodo").mkdir(exist_ok=True)
    (repo / ".snodo" / "protocol.yml").write_text(f"""\
protocol_id: t
name: t
modes:
  - mode_id: producer
    tools: [read, edit, test, validate, dispatch, commit]
    validators: [scope, tests]
    coder: mock
    coder_config: {coder_config}
validators:
  - {{validator_id: scope, validator_type: protocol}}
  - {{validator_id: tests, validator_type: pytest, evaluation_phase: post_execute{tests_extra}}}
{tail}""")


def git_on_path(where: Path, before_exec: str) -> dict[str, str]:
    """This environment with a ``git`` first on ``PATH`` that runs ``before_exec`` (shell
    text, git's arguments in ``$*``) and then execs the real git. snodo finds its git once, at
    import, on the ``PATH`` it starts with: every git a process started with it runs passes
    through the script."""
    real = shutil.which("git")
    assert real is not None
    where.mkdir(parents=True, exist_ok=True)
    (where / "git").write_text(f'#!/bin/sh\n{before_exec}\nexec "{real}" "$@"\n')
    (where / "git").chmod(0o755)
    return {**os.environ, "PATH": f"{where}{os.pathsep}{os.environ['PATH']}"}


def make_repo(path: Path) -> Path:
    path.mkdir(parents=True, exist_ok=True)
    git(path, "init", "-q", "-b", "main")
    git(path, "config", "user.email", "dev@example.com")
    git(path, "config", "user.name", "Dev")
    (path / "README.md").write_text("# project\n")
    git(path, "add", "README.md")
    git(path, "commit", "-q", "-m", "initial")
    return path


@pytest.fixture
def git_repo(tmp_path: Path) -> Path:
    return make_repo(tmp_path / "repo")


class CliResult:
    def __init__(self, proc: subprocess.CompletedProcess[str]) -> None:
        self.returncode = proc.returncode
        self.stdout = proc.stdout
        self.stderr = proc.stderr

    def json(self) -> Any:
        return json.loads(self.stdout)

    def __repr__(self) -> str:
        return f"<exit {self.returncode}\nstdout:\n{self.stdout}\nstderr:\n{self.stderr}>"


@pytest.fixture
def snodo_cli(snodo_home: Path) -> Callable[..., CliResult]:
    """Run ``snodo`` as a real subprocess (the installed console entry point's module)."""

    def run(
        *args: str, cwd: Path, input: str | None = None, env: dict[str, str] | None = None, timeout: float = 120
    ) -> CliResult:
        full_env = {**os.environ, "SNODO_HOME": str(snodo_home), "COLUMNS": "200", **(env or {})}
        proc = subprocess.run(
            [sys.executable, "-m", "snodo", *args],
            cwd=cwd,
            input=input,
            capture_output=True,
            text=True,
            env=full_env,
            timeout=timeout,
        )
        return CliResult(proc)

    return run


@contextlib.contextmanager
def busy_job_slot(repo: Path, n: int = 0) -> Iterator[None]:
    """Hold background-job slot ``n`` the way a running job holds it (an ``flock`` on its
    lock file), so jobs dispatched meanwhile must wait however fast or slow the machine is;
    released on leaving."""
    directory = repo / ".git" / "snodo" / "jobs" / ".slots"
    directory.mkdir(parents=True, exist_ok=True)
    fd = os.open(directory / f"slot-{n}.lock", os.O_RDWR | os.O_CREAT, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)
