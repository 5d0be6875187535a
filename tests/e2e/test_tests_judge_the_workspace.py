"""`snodo run` on projects with their own virtual environment and an editable install.

The trap these close: the project's interpreter imports the package from the user's
checkout (the editable install), not from the task's worktree, so broken work "passes".
Each project here has ``.venv`` (made with ``python -m venv``; pytest reaches it through a
``.pth`` file naming the directory snodo's own pytest lives in) and an editable install of
itself written the way setuptools writes one for these layouts: an ``__editable__`` ``.pth``
file naming the checkout's source directory, and a dist-info. The mock coder then breaks
or correctly extends the code, and the real pytest validator judges.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import git, make_repo

pytestmark = pytest.mark.slow

CALC = "def add(a, b):\n    return a + b\n"
BROKEN = "def add(a, b):\n    return a - b\n"
EXTENDED = CALC + "\n\ndef sub(a, b):\n    return a - b\n"
TEST_CALC = "from calc import add\n\n\ndef test_add():\n    assert add(2, 3) == 5\n"
TEST_SUB = "from calc import sub\n\n\ndef test_sub():\n    assert sub(5, 3) == 2\n"


def make_venv(root: Path, editable_path: Path, dist: str) -> Path:
    """``root/.venv`` with pytest available and ``dist`` installed editable from ``editable_path``."""
    venv = root / ".venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True, capture_output=True)
    python = venv / "bin" / "python"
    site = Path(
        subprocess.run(
            [str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
            check=True,
            capture_output=True,
            text=True,
        ).stdout.strip()
    )
    (site / "_pytest_from_snodo.pth").write_text(str(Path(pytest.__file__).resolve().parent.parent) + "\n")
    (site / f"__editable__.{dist}-0.1.pth").write_text(f"{editable_path}\n")
    info = site / f"{dist}-0.1.dist-info"
    info.mkdir()
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {dist}\nVersion: 0.1\n")
    (info / "direct_url.json").write_text(json.dumps({"url": root.as_uri(), "dir_info": {"editable": True}}))
    (info / "RECORD").write_text("")
    return python


def protocol(tooling: str, files: dict[str, str]) -> str:
    return f"""\
protocol_id: venv
name: Project venv
initial_mode: producer
modes:
  - mode_id: producer
    name: Producer
    tools: [read, edit, test, validate, dispatch, commit]
    validators: [scope, tests]
    coder: mock
    coder_config: {json.dumps({"files": files})}
validators:
  - {{validator_id: scope, validator_type: protocol}}
  - validator_id: tests
    validator_type: pytest
    evaluation_phase: post_execute
    tooling: {tooling}
execution: {{max_recovery_depth: 0}}
"""


def project(tmp_path: Path, name: str, files: dict[str, str], editable: str) -> tuple[Path, Path]:
    """A committed repository with ``files``, its ``.venv`` ignored, installed editable from ``editable``."""
    repo = make_repo(tmp_path / name)
    for rel, content in files.items():
        (repo / rel).parent.mkdir(parents=True, exist_ok=True)
        (repo / rel).write_text(content)
    (repo / ".gitignore").write_text(".venv/\n")
    python = make_venv(repo, repo / editable, name)
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", "project")
    return repo, python


def run(snodo_cli, repo: Path, tooling: str, files: dict[str, str]):  # type: ignore[no-untyped-def]
    (repo / ".snodo").mkdir(exist_ok=True)
    (repo / ".snodo" / "protocol.yml").write_text(protocol(tooling, files))
    return snodo_cli("run", "change calc", "--json", cwd=repo, timeout=300)


def judged(payload: dict) -> dict:  # type: ignore[type-arg]
    return next(r for r in payload["validators"] if r["validator_id"] == "tests")


SRC_FILES = {
    "pyproject.toml": '[project]\nname = "calc"\nversion = "0.1"\n\n[tool.setuptools.packages.find]\nwhere = ["src"]\n',
    "src/calc/__init__.py": CALC,
    "tests/test_calc.py": TEST_CALC,
}
VENV = "{python: .venv/bin/python, timeout: 120}"


@pytest.fixture
def src_project(tmp_path: Path) -> tuple[Path, Path]:
    return project(tmp_path, "srcproj", SRC_FILES, "src")


def test_src_layout_broken_change_is_a_blocker_naming_the_test(snodo_cli, src_project) -> None:  # type: ignore[no-untyped-def]
    repo, python = src_project
    # The trap is real: the project's interpreter imports calc from the user's checkout.
    origin = subprocess.run(
        [str(python), "-c", "import calc; print(calc.__file__)"], cwd="/", capture_output=True, text=True
    )
    assert origin.stdout.strip() == str(repo / "src" / "calc" / "__init__.py")
    r = run(snodo_cli, repo, VENV, {"src/calc/__init__.py": BROKEN})
    assert r.returncode == 1, r
    payload = r.json()
    assert (payload["status"], payload["outcome"]) == ("halted", "blocker"), payload
    result = judged(payload)
    assert result["severity"] == "blocker"
    assert "tests/test_calc.py::test_add" in result["justification"]
    assert (repo / "src" / "calc" / "__init__.py").read_text() == CALC  # the checkout is untouched


def test_src_layout_correct_change_completes(snodo_cli, src_project) -> None:  # type: ignore[no-untyped-def]
    repo, _ = src_project
    r = run(snodo_cli, repo, VENV, {"src/calc/__init__.py": EXTENDED, "tests/test_sub.py": TEST_SUB})
    assert r.returncode == 0, r
    payload = r.json()
    assert payload["status"] == "completed"
    assert "1 of 1 base-passing test(s) pass" in judged(payload)["justification"]
    assert "added tests: 1 of 1 passed" in judged(payload)["justification"]


def assert_not_from_the_workspace(error: str, checkout_file: Path) -> None:
    """The tests would have judged the user's checkout instead of the working copy. Where
    the checkout is visible to the sandbox (Landlock; a checkout outside /tmp) the probe
    sees the import and names it; under bubblewrap a checkout below the host's /tmp is not
    visible at all, so the import fails and the error names the missing module. Either way
    the tests could not judge the task's work: no verdict."""
    seen = f"calc from {checkout_file}" in error
    unseen = "No module named 'calc'" in error
    assert seen or unseen, error


def test_src_layout_importing_from_the_checkout_is_a_validator_error(snodo_cli, src_project) -> None:  # type: ignore[no-untyped-def]
    repo, _ = src_project
    # tooling.pythonpath replaces the detected roots: src is no longer on the path, so the
    # tests would import calc through the editable install, from the user's checkout.
    r = run(snodo_cli, repo, "{python: .venv/bin/python, pythonpath: [tests]}", {"src/calc/__init__.py": BROKEN})
    assert r.returncode == 1, r
    payload = r.json()
    assert payload["outcome"] == "validator_error", payload
    error = judged(payload)["error"]
    assert_not_from_the_workspace(error, repo / "src" / "calc" / "__init__.py")


FLAT_FILES = {
    "pyproject.toml": '[project]\nname = "calc"\nversion = "0.1"\n\n[tool.setuptools]\npy-modules = ["calc"]\n',
    "calc.py": CALC,
    "tests/test_calc.py": TEST_CALC,
}


@pytest.fixture
def flat_project(tmp_path: Path) -> tuple[Path, Path]:
    return project(tmp_path, "flatproj", FLAT_FILES, ".")


def test_flat_layout_broken_then_correct(snodo_cli, flat_project) -> None:  # type: ignore[no-untyped-def]
    repo, _ = flat_project
    broken = run(snodo_cli, repo, VENV, {"calc.py": BROKEN})
    assert broken.returncode == 1, broken
    assert broken.json()["outcome"] == "blocker"
    assert "tests/test_calc.py::test_add" in judged(broken.json())["justification"]
    fixed = run(snodo_cli, repo, VENV, {"calc.py": EXTENDED, "tests/test_sub.py": TEST_SUB})
    assert fixed.returncode == 0, fixed
    assert fixed.json()["status"] == "completed"


def test_flat_layout_conftest_pointing_at_the_checkout_is_a_validator_error(snodo_cli, flat_project) -> None:  # type: ignore[no-untyped-def]
    repo, _ = flat_project
    (repo / "conftest.py").write_text(f"import sys\n\nsys.path.insert(0, {str(repo)!r})\n")
    git(repo, "add", "conftest.py")
    git(repo, "commit", "-q", "-m", "a conftest that edits sys.path")
    r = run(snodo_cli, repo, VENV, {"calc.py": BROKEN})
    assert r.returncode == 1, r
    payload = r.json()
    if payload["outcome"] == "blocker":
        # Under bubblewrap the checkout (below the host's /tmp) is not in the sandbox: the
        # conftest's path points at nothing and the working copy's broken code is judged.
        assert "tests/test_calc.py::test_add" in judged(payload)["justification"], payload
        return
    assert payload["outcome"] == "validator_error", payload
    assert_not_from_the_workspace(judged(payload)["error"], repo / "calc.py")


LIB_FILES = {
    "lib/calc.py": CALC,
    "tests/test_calc.py": TEST_CALC,
}
LIB_VENV = "{python: .venv/bin/python, pythonpath: [lib], timeout: 120}"


@pytest.fixture
def lib_project(tmp_path: Path) -> tuple[Path, Path]:
    return project(tmp_path, "libproj", LIB_FILES, "lib")


def test_pythonpath_project_broken_then_correct(snodo_cli, lib_project) -> None:  # type: ignore[no-untyped-def]
    repo, _ = lib_project
    broken = run(snodo_cli, repo, LIB_VENV, {"lib/calc.py": BROKEN})
    assert broken.returncode == 1, broken
    assert broken.json()["outcome"] == "blocker"
    assert "tests/test_calc.py::test_add" in judged(broken.json())["justification"]
    fixed = run(snodo_cli, repo, LIB_VENV, {"lib/calc.py": EXTENDED, "tests/test_sub.py": TEST_SUB})
    assert fixed.returncode == 0, fixed


def test_pythonpath_project_without_the_setting_is_a_validator_error(snodo_cli, lib_project) -> None:  # type: ignore[no-untyped-def]
    repo, _ = lib_project
    r = run(snodo_cli, repo, VENV, {"lib/calc.py": BROKEN})
    assert r.returncode == 1, r
    payload = r.json()
    assert payload["outcome"] == "validator_error", payload
    assert_not_from_the_workspace(judged(payload)["error"], repo / "lib" / "calc.py")


def test_a_fix_attempt_is_told_which_tests_failed_and_how(snodo_cli, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    repo = make_repo(tmp_path / "recover")
    (repo / "calc.py").write_text(CALC)
    (repo / "tests").mkdir()
    (repo / "tests" / "test_calc.py").write_text(TEST_CALC)
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", "calc")
    (repo / ".snodo").mkdir()
    text = protocol("{timeout: 120}", {"calc.py": BROKEN}).replace(
        "    evaluation_phase: post_execute\n", "    evaluation_phase: post_execute\n    severity_cap: warn\n"
    )
    (repo / ".snodo" / "protocol.yml").write_text(text.replace("max_recovery_depth: 0", "max_recovery_depth: 1"))
    r = snodo_cli("run", "change calc", "--json", cwd=repo, timeout=300)
    assert r.returncode == 1 and r.json()["outcome"] == "escalate", r
    events = [json.loads(line) for line in (repo / ".git" / "snodo" / "audit.log").read_text().splitlines()]
    retry = next(e for e in events if e["event"] == "dispatch" and e["data"]["attempt"] == 1)
    (finding,) = [f for f in retry["data"]["findings"] if f.startswith("tests:")]
    assert "1 test(s) that pass at the base do not pass after the change" in finding
    assert "failed tests: tests/test_calc.py::test_add" in finding
    assert "assert -1 == 5" in finding  # the failing assertion itself, from the output excerpt
