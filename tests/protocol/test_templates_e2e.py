"""Every shipped template, end to end, offline: `snodo init`, `protocol check` clean, and every
mode that can run tasks completes `snodo run --mock` on a small project (flat and src layout);
modes that cannot are refused before anything runs. No template lets a human approve a failed
mechanical acceptance criterion.

Real subprocesses in real git repositories; the validators judge for real (pytest runs).
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from snodo.plugin.host import get_plugin_manager
from snodo.plugin.records import PredicateContext
from snodo.protocol import check, parse_protocol
from snodo.protocol.templates import TEMPLATES, template_text
from tests.protocol.markers import git, make_sample_project, snodo_argv, snodo_env

TEMPLATE_NAMES = sorted(TEMPLATES)


def snodo(project: Path, home: Path, *args: str, timeout: float = 600) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        snodo_argv(*args), cwd=project, env=snodo_env(home), capture_output=True, text=True, timeout=timeout
    )


def initialised(root: Path, template: str, layout: str) -> Path:
    project = make_sample_project(root, layout)
    r = snodo(project, root.parent / "home", "init", "--template", template)
    assert r.returncode == 0, r.stderr
    assert "docs/tasks.md" in r.stdout  # init points to how to write a task spec
    git(project, "add", "-A")
    git(project, "commit", "-qm", "snodo protocol")
    return project


@pytest.mark.parametrize("name", TEMPLATE_NAMES)
def test_every_template_checks_clean_with_the_installed_plugins(name: str) -> None:
    violations = check(parse_protocol(template_text(name), source=name), get_plugin_manager())
    assert violations == [], [str(v) for v in violations]


def runnable(name: str) -> list[str]:
    proto = parse_protocol(template_text(name))
    return [m.mode_id for m in proto.modes if proto.cannot_run_tasks(m.mode_id) is None]


def test_every_template_has_a_runnable_mode() -> None:
    assert {name: runnable(name) for name in TEMPLATE_NAMES} == {
        "2+n": ["producer"],
        "solo": ["producer"],
        "team": ["producer"],
    }


@pytest.mark.slow
@pytest.mark.parametrize("layout", ["flat", "src"])
@pytest.mark.parametrize("name", TEMPLATE_NAMES)
def test_template_runs_every_mode_offline(name: str, layout: str, tmp_path: Path) -> None:
    project = initialised(tmp_path / "project", name, layout)
    home = tmp_path / "home"
    checked = snodo(project, home, "protocol", "check")
    assert checked.returncode == 0 and "warning" not in checked.stderr, checked.stderr
    proto = parse_protocol(template_text(name))
    for mode in proto.modes:
        r = snodo(project, home, "run", "add a hello module", "--mock", "--mode", mode.mode_id, "--json")
        refusal = proto.cannot_run_tasks(mode.mode_id)
        if refusal is None:
            assert r.returncode == 0, r.stdout + r.stderr
            payload = json.loads(r.stdout)
            assert payload["status"] == "completed", payload
            assert sorted(payload["files"]) == ["hello.py", "tests/test_hello.py"]
            shown = git(project, "show", "--stat", "--format=", payload["branch"])
            assert "hello.py" in shown
        else:
            assert r.returncode == 4, r.stdout + r.stderr
            assert refusal in r.stderr + r.stdout  # plain text, or the JSON error object
            assert f"mode {mode.mode_id!r} does not hold the 'dispatch' capability" in refusal
    jobs = sorted((project / ".snodo" / "jobs").iterdir())
    assert len(jobs) == len(runnable(name)), "a refused mode must not leave a job behind"


@pytest.mark.slow
@pytest.mark.parametrize("name", TEMPLATE_NAMES)
def test_no_template_makes_a_failed_mechanical_criterion_approvable(name: str, tmp_path: Path) -> None:
    project = initialised(tmp_path / "project", name, "flat")
    spec = "add a hello module\n\nAcceptance criteria:\n- file `docs/hello.md` exists\n"
    r = snodo(project, tmp_path / "home", "run", spec, "--mock", "--json")
    assert r.returncode == 1, r.stdout + r.stderr
    payload = json.loads(r.stdout)
    assert payload["outcome"] == "blocker", payload
    assert payload["decision_id"] is None  # nothing a human could sign
    rows = [v for v in payload["validators"] if v["validator_id"] == "acceptance"]
    assert rows and rows[0]["severity"] == "blocker" and "docs/hello.md not found" in rows[0]["justification"]


def test_two_plus_n_scope_reaches_packages_and_src_layout(tmp_path: Path) -> None:
    """`*` stays in one folder, `**` reaches below: the template's scope admits package files."""
    from snodo_plugins.predicates import files_in_scope

    proto = parse_protocol(template_text("2+n"))
    (scope,) = [c for c in proto.mode("producer").constraints if c.predicate == "files_in_scope"]

    def verdict(*changed: str) -> bool:
        ctx = PredicateContext(
            workspace=tmp_path, task_id="t", task_spec="s", phase="pre_execute", changed_files=changed
        )
        return files_in_scope(ctx, scope.params).ok

    assert verdict("calc/__init__.py", "src/pkg/mod.py", "src/pkg/data.json", "tests/unit/test_mod.py")
    assert verdict("hello.py", "docs/guide/usage.md", "CHANGES.md")
    assert not verdict(".github/workflows/ci.yml")
    assert not verdict("setup.cfg")
