"""The foundation's command line, run as real subprocesses: init, protocol check, --help."""

from __future__ import annotations

import hashlib
import importlib.metadata as metadata
import shutil
import subprocess
import sys
from pathlib import Path

from tests.conftest import git
from tests.protocol.test_wellformed import BROKEN


def tree_digest(root: Path) -> dict[str, str]:
    return {
        str(p.relative_to(root)): hashlib.sha256(p.read_bytes()).hexdigest() if p.is_file() else "dir"
        for p in sorted(root.rglob("*"))
        if ".git" not in p.relative_to(root).parts
    }


def test_init_writes_protocol_and_state_and_commits_nothing(git_repo: Path, snodo_cli) -> None:  # type: ignore[no-untyped-def]
    head = git(git_repo, "rev-parse", "HEAD")
    r = snodo_cli("init", "--template", "team", cwd=git_repo)
    assert r.returncode == 0, r
    assert (git_repo / ".snodo" / "protocol.yml").read_text().startswith("# snodo protocol — team")
    assert (git_repo / ".git" / "snodo" / "state.json").exists()
    assert git(git_repo, "rev-parse", "HEAD") == head
    again = snodo_cli("init", cwd=git_repo)
    assert again.returncode == 4 and "already exists" in again.stderr and "--force" in again.stderr
    assert "Traceback" not in again.stderr
    forced = snodo_cli("init", "--template", "solo", "--force", cwd=git_repo)
    assert forced.returncode == 0
    assert snodo_cli("protocol", "check", cwd=git_repo).returncode == 0


def test_protocol_check_reports_all_violations_and_writes_nothing(tmp_path: Path, snodo_cli) -> None:  # type: ignore[no-untyped-def]
    proto = tmp_path / "p.yml"
    proto.write_text(BROKEN.replace("coder: mock", "coder: mock"))
    before = tree_digest(tmp_path)
    r = snodo_cli("protocol", "check", str(proto), cwd=tmp_path)
    assert r.returncode == 1, r
    for rule in ("WF1", "WF3", "WF4", "WF5"):
        assert f"- {rule}:" in r.stderr, r.stderr
    assert "producer, reviewer" in r.stderr and "'ghost'" in r.stderr and "no_such_predicate" in r.stderr
    assert "Traceback" not in r.stderr
    assert tree_digest(tmp_path) == before
    js = snodo_cli("protocol", "check", str(proto), "--json", cwd=tmp_path)
    assert js.returncode == 1
    assert {e["rule"] for e in js.json()["errors"]} >= {"WF1", "WF3", "WF4", "WF5"}


def test_schema_errors_are_one_line_each(tmp_path: Path, snodo_cli) -> None:  # type: ignore[no-untyped-def]
    cases = {
        "typo": (
            BROKEN.replace("    validators: [tests]\n    coder: mock\n\n", "").replace(
                "    validators: [tests, ghost]", "    validatorz: [tests]"
            ),
            "unknown key 'validatorz'",
        ),
        "string": (BROKEN.replace("tools: [review, approve]", "tools: edit"), "expected a list, got str 'edit'"),
        "yaml": (BROKEN + "  - broken: [\n", "YAML syntax error"),
    }
    for name, (text, expected) in cases.items():
        path = tmp_path / f"{name}.yml"
        path.write_text(text)
        r = snodo_cli("protocol", "check", str(path), cwd=tmp_path)
        assert r.returncode == 1, (name, r)
        lines = [ln for ln in r.stderr.splitlines() if expected in ln]
        assert len(lines) == 1, (name, r.stderr)
        assert f"{path}:" in lines[0], lines[0]
        assert "Traceback" not in r.stderr


def test_verbose_shows_the_traceback(tmp_path: Path, snodo_cli) -> None:  # type: ignore[no-untyped-def]
    (tmp_path / "bad.yml").write_text("a: [\n")
    r = snodo_cli("-v", "protocol", "check", "bad.yml", cwd=tmp_path)
    assert r.returncode == 1 and "Traceback" in r.stderr


def test_missing_protocol_exits_nonzero_with_hint(tmp_path: Path, snodo_cli) -> None:  # type: ignore[no-untyped-def]
    r = snodo_cli("protocol", "check", cwd=tmp_path)
    assert r.returncode == 4 and "snodo init" in r.stderr


def test_help_and_protocol_check_never_import_heavy_libraries(tmp_path: Path, snodo_home: Path) -> None:
    (tmp_path / ".snodo").mkdir()
    from snodo.protocol.templates import template_text

    (tmp_path / ".snodo" / "protocol.yml").write_text(template_text("team"))
    probe = (
        "import sys\n"
        "from snodo.cli.main import cli\n"
        "for args in (['--help'], ['protocol', 'check']):\n"
        "    try:\n"
        "        cli.main(args=args, standalone_mode=False)\n"
        "    except SystemExit:\n"
        "        pass\n"
        "heavy = sorted(m for m in sys.modules if m.split('.')[0] in ('litellm', 'mcp', 'openai', 'pydantic'))\n"
        "print('HEAVY', heavy)\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", probe],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        env={"SNODO_HOME": str(snodo_home), "PATH": "/usr/bin:/bin"},
        check=True,
    )
    assert "HEAVY []" in out.stdout, out.stdout + out.stderr


def test_a_command_exits_while_a_daemon_thread_holds_an_import_lock(tmp_path: Path, snodo_home: Path) -> None:
    """A model call abandoned at its deadline is a daemon thread that may be inside an import
    when the command ends; a finaliser that imports the same module (litellm's HTTP handlers
    do) then waited for ever in the interpreter's finalisation, and the process never exited.
    The command's exit code still comes out, and its exit handlers still run."""
    (tmp_path / "slowmod.py").write_text("import time\ntime.sleep(120)\n")
    probe = (
        "import atexit, gc, sys, threading, time\n"
        f"sys.path.insert(0, {str(tmp_path)!r})\n"
        "threading.Thread(target=lambda: __import__('slowmod'), daemon=True).start()\n"
        "time.sleep(0.5)  # the thread now holds slowmod's import lock\n"
        "class Finaliser:\n"
        "    def __del__(self):\n"
        "        import slowmod\n"
        "gc.disable()\n"
        "held = Finaliser(); held.cycle = held; del held  # collected only by finalisation\n"
        "atexit.register(lambda: print('EXIT HANDLER RAN', flush=True))\n"
        "from snodo.cli.main import main\n"
        "main(['--version'])\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", probe],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        env={"SNODO_HOME": str(snodo_home), "PATH": "/usr/bin:/bin"},
        timeout=60,
    )
    assert out.returncode == 0, out.stderr
    assert "version" in out.stdout and "EXIT HANDLER RAN" in out.stdout, out.stdout


def test_version_names_the_distribution_even_beside_a_second_copy_of_its_metadata(tmp_path: Path) -> None:
    """`python -m snodo --version` from a source checkout sees the installed metadata and the
    checkout's own (``snodo_governance.egg-info``): the version is asked of the distribution by
    name, never guessed from the import name."""
    dist = metadata.distribution("snodo-governance")
    files = [f for f in dist.files or [] if f.parent.name.endswith((".dist-info", ".egg-info"))]
    assert files, "the installed distribution has no metadata directory"
    shutil.copytree(Path(str(files[0].locate())).parent, tmp_path / "snodo_governance.egg-info")
    out = subprocess.run(
        [sys.executable, "-m", "snodo", "--version"], cwd=tmp_path, capture_output=True, text=True, timeout=60
    )
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == f"snodo, version {dist.version}"
