"""Every bad protocol in the table is refused by `protocol check`, `run`, `validate` and `serve`
alike — the same message, exactly — before any validator, coder or predicate runs.

The commands run as real subprocesses with a real plugin (installed through an entry point)
whose validator, coder and predicate leave marker files; the control test shows that an
accepted protocol does make them run, so an absent marker means nothing ran.
"""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from tests.protocol.bad_cases import BASE, CASES, Case
from tests.protocol.markers import install_marker_plugin, make_sample_project, snodo_argv, snodo_env

SPEC = "add a hello module"
COMMANDS: dict[str, tuple[list[str], int]] = {
    "check": (["protocol", "check"], 1),
    "run": (["run", SPEC], 4),
    "validate": (["validate", SPEC], 4),
    "serve": (["serve"], 4),
}


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return install_marker_plugin(tmp_path_factory.mktemp("site"))


def project_with(root: Path, text: str, *, git: bool = True) -> tuple[Path, Path]:
    """A sample project with ``text`` as its protocol; without ``git`` a plain folder suffices
    (the protocol is refused before anything looks at the repository)."""
    project = make_sample_project(root) if git else root
    project.mkdir(parents=True, exist_ok=True)
    protocol = project / ".snodo" / "protocol.yml"
    protocol.parent.mkdir()
    protocol.write_text(text)
    markers = root.parent / f"{root.name}-markers"
    markers.mkdir()
    return project, markers


def run_all(project: Path, env: dict[str, str]) -> dict[str, subprocess.CompletedProcess[str]]:
    """The four commands at once (each its own process), so the table stays quick."""
    procs = {
        name: subprocess.Popen(
            snodo_argv(*args),
            cwd=project,
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for name, (args, _code) in COMMANDS.items()
    }
    done = {}
    for name, proc in procs.items():
        out, err = proc.communicate(timeout=120)
        done[name] = subprocess.CompletedProcess(proc.args, proc.returncode, out, err)
    return done


def reported(stderr: str) -> list[str]:
    """The error headline and problem lines a command printed (hint lines aside)."""
    lines = []
    for line in stderr.splitlines():
        if line.startswith("error: "):
            lines.append(line.removeprefix("error: "))
        elif line.startswith("  - "):
            lines.append(line.removeprefix("  - "))
    return lines


def test_table_has_every_issue_case_and_forty_or_more() -> None:
    ids = {c.id for c in CASES}
    assert len(CASES) >= 40 and len(ids) == len(CASES)
    for from_the_issue in (
        "duplicate-top-level-key",
        "tooling-key-typo",
        "leftover-coder-config-for-mock",
        "coder-config-typo",
        "timeout-as-string",
        "timeout-negative",
        "max-iterations-zero",
        "max-recovery-depth-negative",
        "version-not-semver",
        "deep-nesting",
        "alias-bomb",
        "huge-file",
        "dispatch-without-post-execute",
    ):
        assert from_the_issue in ids


@pytest.mark.slow
def test_an_accepted_protocol_does_run_the_marker_plugins(tmp_path: Path, site: Path) -> None:
    """The control: with the base protocol the same commands reach the validators and the coder."""
    project, markers = project_with(tmp_path / "project", BASE)
    subprocess.run(["git", "-C", str(project), "add", "-A"], check=True)
    subprocess.run(["git", "-C", str(project), "commit", "-qm", "protocol"], check=True)
    env = snodo_env(tmp_path / "home", site, markers)
    check = subprocess.run(snodo_argv("protocol", "check"), cwd=project, env=env, capture_output=True, text=True)
    assert check.returncode == 0, check.stderr
    assert not list(markers.iterdir()), "protocol check must run nothing"
    run = subprocess.run(snodo_argv("run", SPEC), cwd=project, env=env, capture_output=True, text=True, timeout=300)
    assert run.returncode == 0, run.stdout + run.stderr
    assert {p.name for p in markers.iterdir()} == {
        "predicate",
        "validator-gate",
        "coder-built",
        "coder-ran",
        "validator-judge",
    }


@pytest.mark.slow
@pytest.mark.parametrize("bad", CASES, ids=[c.id for c in CASES])
def test_bad_protocol_is_refused_alike_before_anything_runs(bad: Case, tmp_path: Path, site: Path) -> None:
    project, markers = project_with(tmp_path / "project", bad.text(), git=False)
    path = str(project / ".snodo" / "protocol.yml")
    expected = [bad.headline.replace("{p}", path)]
    problems = [e.replace("{p}", path) for e in bad.expected]
    if problems != [expected[0]]:
        expected += problems
    results = run_all(project, snodo_env(tmp_path / "home", site, markers))
    for name, result in results.items():
        where = f"snodo {name}: exit {result.returncode}\n{result.stdout}\n{result.stderr}"
        assert result.returncode == COMMANDS[name][1], where
        assert "Traceback" not in result.stderr, where
        lines = reported(result.stderr)
        assert lines[0].startswith(expected[0]), where  # the headline also counts the problems
        assert sorted(lines[1:]) == sorted(expected[1:]), where
    assert not list(markers.iterdir()), f"something ran: {sorted(p.name for p in markers.iterdir())}"
    assert not (project / ".git" / "snodo" / "jobs").exists(), "no job may be created for a refused protocol"
