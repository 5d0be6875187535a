"""What a change does to the tests decides who acts: added tests pass alone, changed tests
and harness go to a person with their diff, held-out tests stay hidden from the agent."""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.conftest import CliResult, git

from .conftest import LIB, SPEC, Library, make_library

IMPLEMENTED = "def add(a, b):\n    return a + b\n\n\ndef mul(a, b):\n    return a * b\n"
SPECIAL_CASED = "def add(a, b):\n    return a + b\n\n\ndef mul(a, b):\n    return 6 if (a, b) == (2, 3) else 0\n"

pytestmark = pytest.mark.slow


def test_an_added_test_module_runs_apart_and_needs_no_person(library: Library) -> None:
    library.commit(
        {
            "src/calc/__init__.py": IMPLEMENTED,
            "tests/test_more.py": "from calc import mul\n\n\ndef test_mul_zero():\n    assert mul(0, 5) == 0\n",
        }
    )
    status, result = library.judged()
    assert status == "pass", result
    assert "added tests: 1 of 1 passed" in result["justification"]


def test_a_failing_added_test_is_a_blocker(library: Library) -> None:
    library.commit({"src/calc/__init__.py": IMPLEMENTED, "tests/test_more.py": "def test_no():\n    assert 1 == 2\n"})
    status, result = library.judged()
    assert status == "blocker", result
    assert "added tests fail: tests/test_more.py::test_no" in result["justification"]


def test_an_edited_test_escalates_with_its_diff_and_the_base_version_runs(library: Library) -> None:
    weakened = (library.root / "tests" / "test_calc.py").read_text().replace("== 6", "is not None")
    library.commit({"tests/test_calc.py": weakened})
    status, result = library.judged()
    # the base's test_mul still runs, and still fails: the edit bought nothing
    assert status == "blocker", result
    assert "tests/test_calc.py::test_mul (failed)" in result["justification"]
    shown = result["details"]["escalations"]
    assert shown[0]["what"] == "test changed: tests/test_calc.py"
    assert (
        "-    assert mul(2, 3) == 6" in shown[0]["shown"] and "+    assert mul(2, 3) is not None" in shown[0]["shown"]
    )


def test_a_harness_change_with_honest_source_escalates_whatever_the_policy(library: Library) -> None:
    library.commit(
        {
            "src/calc/__init__.py": IMPLEMENTED,
            "tests/conftest.py": "import pytest\n\n\n@pytest.fixture\ndef two():\n    return 2\n",
        }
    )
    payload = library.validate()
    assert payload["status"] == "escalate", payload
    (result,) = [r for r in payload["results"] if r["validator_id"] == "tests"]
    assert result["escalate"] is True and result["severity"] == "warn"
    assert result["details"]["escalations"][0]["what"] == "test harness changed: tests/conftest.py"
    # a person sees the diff before deciding, every character an agent wrote escaped
    shown = library.cli("authorize", payload["decision_id"], "--reject", cwd=library.root, input="n\n")
    assert "+def two():" in shown.stdout, shown


def test_control_characters_in_a_test_diff_are_escaped(library: Library) -> None:
    library.commit({"src/calc/__init__.py": IMPLEMENTED, "tests/conftest.py": "X = '\x1b[2J\x1b[31mhidden'\n"})
    _, result = library.judged()
    diff = result["details"]["escalations"][0]["shown"]
    assert "\x1b" not in diff and "\\x1b[2J" in diff


def test_held_out_tests_catch_special_casing_and_their_ids_stay_with_the_person(
    tmp_path: Path, snodo_cli: Callable[..., CliResult]
) -> None:
    held = tmp_path / "held-out"
    (held / "tests").mkdir(parents=True)
    (held / "tests" / "test_mul_hidden.py").write_text(
        "from calc import mul\n\n\ndef test_secret_mul_case():\n    assert mul(4, 5) == 20\n\n\n"
        "def test_secret_mul_zero():\n    assert mul(0, 9) == 0\n"
    )
    lib = make_library(tmp_path / "lib", snodo_cli, tooling=json.dumps({"timeout": 60, "held_out": str(held)}))
    lib.commit({"src/calc/__init__.py": SPECIAL_CASED})
    payload = lib.validate()
    assert payload["status"] == "blocker", payload
    text = json.dumps(payload)
    assert "held-out: 1 of 2 passed" in text
    assert "test_secret_mul_case" not in text and "test_mul_hidden" not in text  # the agent learns only the count
    audit = (lib.root / ".git" / "snodo" / "audit.log").read_text()
    assert "test_secret_mul_case" in audit  # the person and the audit log see which

    honest = make_library(tmp_path / "lib2", snodo_cli, tooling=json.dumps({"timeout": 60, "held_out": str(held)}))
    honest.commit({"src/calc/__init__.py": IMPLEMENTED})
    status, result = honest.judged()
    assert status == "pass", result
    assert "held-out: 2 of 2 passed" in result["justification"]


def test_the_engine_path_judges_the_same_way(tmp_path: Path, snodo_cli: Callable[..., CliResult]) -> None:
    """`snodo run`: the mock coder does the work and also deletes the tests: a person must see that."""
    lib = make_library(tmp_path / "lib", snodo_cli)
    protocol = (lib.root / ".snodo" / "protocol.yml").read_text()
    config = json.dumps({"files": {"src/calc/__init__.py": IMPLEMENTED}, "delete": ["tests/test_calc.py"]})
    protocol = protocol.replace("    coder_config: {}\n", f"    coder_config: {config}\n")
    (lib.root / ".snodo" / "protocol.yml").write_text(protocol + "execution: {max_recovery_depth: 0}\n")
    from tests.conftest import git

    git(lib.root, "commit", "-q", "-am", "the coder deletes the tests")
    r = snodo_cli("run", SPEC, "--json", cwd=lib.root, timeout=240)
    payload = r.json()
    assert (payload["status"], payload["outcome"]) == ("halted", "escalate"), payload
    (tests,) = [v for v in payload["validators"] if v["validator_id"] == "tests"]
    assert tests["details"]["escalations"][0]["what"] == "test deleted: tests/test_calc.py"


def test_a_refused_write_is_never_dropped_quietly(tmp_path: Path, snodo_cli: Callable[..., CliResult]) -> None:
    """The coder's write to a protected path is filtered out and the run escalates naming it."""
    from tests.conftest import git

    lib = make_library(tmp_path / "lib", snodo_cli)
    files = {"src/calc/__init__.py": IMPLEMENTED, "ci/deploy.yml": "steps: [rm -rf /]\n"}
    protocol = (
        (lib.root / ".snodo" / "protocol.yml")
        .read_text()
        .replace("    coder_config: {}\n", f"    coder_config: {json.dumps({'files': files})}\n")
    )
    (lib.root / ".snodo" / "protocol.yml").write_text(
        protocol + "protected_paths: [ci]\nexecution: {max_recovery_depth: 0}\n"
    )
    git(lib.root, "commit", "-q", "-am", "a protected directory")
    r = snodo_cli("run", SPEC, "--json", cwd=lib.root, timeout=240)
    payload = r.json()
    assert (payload["status"], payload["outcome"]) == ("halted", "escalate"), payload
    assert "ci/deploy.yml" in json.dumps(payload["validators"])
    text = snodo_cli("run", "--resume", payload["task_id"], cwd=lib.root, timeout=240)
    assert "ci/deploy.yml" in text.stdout + text.stderr


def test_held_out_tests_are_laid_out_in_the_copy_never_through_a_link_of_the_change(
    tmp_path: Path, snodo_cli: Callable[..., CliResult]
) -> None:
    """A change that puts a link where the held-out tests go (``hidden -> a directory the
    agent reads``) gets them in a real directory of the judge's copy: none is written (or
    deleted) through the link, and they still judge the change."""
    held = tmp_path / "held-out"
    (held / "hidden").mkdir(parents=True)
    (held / "hidden" / "test_mul_hidden.py").write_text(
        "from calc import mul\n\n\ndef test_secret_mul_case():\n    assert mul(4, 5) == 20\n"
    )
    outside = tmp_path / "agent-reads-here"
    outside.mkdir()
    (outside / "test_mul_hidden.py").write_text("the agent's own file\n")
    lib = make_library(tmp_path / "lib", snodo_cli, tooling=json.dumps({"timeout": 60, "held_out": str(held)}))
    lib.write({"src/calc/__init__.py": SPECIAL_CASED})
    (lib.root / "hidden").symlink_to(outside)
    git(lib.root, "add", "-A")
    git(lib.root, "commit", "-q", "-m", "change with a link")
    payload = lib.validate()
    assert (outside / "test_mul_hidden.py").read_text() == "the agent's own file\n"
    assert sorted(os.listdir(outside)) == ["test_mul_hidden.py"]
    assert payload["status"] == "blocker", payload
    assert "held-out: 0 of 1 passed" in json.dumps(payload)


def test_a_broken_test_is_named_whole_even_when_its_id_holds_a_parenthesis(
    tmp_path: Path, snodo_cli: Callable[..., CliResult]
) -> None:
    root = tmp_path / "lib"
    make_library(root, snodo_cli)
    cases = 'import pytest\nfrom calc import add\n\n\n@pytest.mark.parametrize("x", ["a (b)"])\ndef test_id(x):\n    assert add(1, 1) == 2\n'
    (root / "tests" / "test_ids.py").write_text(cases)
    git(root, "add", "-A")
    git(root, "commit", "-q", "-m", "a test with a parenthesis in its id")
    library = Library(root, snodo_cli)
    library.commit({"src/calc/__init__.py": LIB.replace("return a + b", "return a - b")})
    status, result = library.judged()
    assert status == "blocker", result
    assert "tests/test_ids.py::test_id[a (b)]" in result["details"]["failed_tests"]
    assert "tests/test_ids.py::test_id[a (b)]:\n" in result["details"]["output_excerpt"]
