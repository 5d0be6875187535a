"""A small library with a base commit, judged by the real CLI: the judging tests' fixtures.

The corpus's library, held-out tests and cases are test *data*: the projects snodo judges.
Collected by snodo's own suite they would run against nothing (``textkit`` is not
importable here) and their conftest hooks would steer this session."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from tests.conftest import CliResult, git, make_repo, write_producer_protocol

LIB = """\
def add(a, b):
    return a + b


def mul(a, b):
    raise NotImplementedError
"""
TESTS = """\
from calc import add, mul


def test_add():
    assert add(1, 2) == 3


def test_add_negative():
    assert add(-2, 2) == 0


def test_mul():
    assert mul(2, 3) == 6
"""
SPEC = "implement calc.mul; tests/test_calc.py::test_mul must pass"

collect_ignore = ["corpus"]


class Library:
    """A git repository whose base commit has ``calc.add`` and a stub ``calc.mul``."""

    def __init__(self, root: Path, cli: Callable[..., CliResult]) -> None:
        self.root = root
        self.cli = cli
        self.base = git(root, "rev-parse", "HEAD").strip()

    def write(self, files: dict[str, str], delete: tuple[str, ...] = ()) -> None:
        for rel, text in files.items():
            path = self.root / rel
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(text)
        for rel in delete:
            (self.root / rel).unlink()

    def commit(self, files: dict[str, str], delete: tuple[str, ...] = ()) -> None:
        """The change, committed as a host's shell would."""
        self.write(files, delete)
        git(self.root, "add", "-A")
        git(self.root, "commit", "-q", "-m", "change")

    def validate(self, spec: str = SPEC) -> dict:
        r = self.cli(
            "validate", spec, "--phase", "post_execute", "--base", self.base, "--json", cwd=self.root, timeout=240
        )
        assert r.returncode in (0, 1, 2, 3), r
        return r.json()

    def judged(self, spec: str = SPEC) -> tuple[str, dict]:
        """The outcome and the pytest validator's result."""
        payload = self.validate(spec)
        (result,) = [r for r in payload["results"] if r["validator_id"] == "tests"]
        return payload["status"], result


def make_library(root: Path, cli: Callable[..., CliResult], tooling: str = "{timeout: 60}") -> Library:
    make_repo(root)
    (root / "src" / "calc").mkdir(parents=True)
    (root / "src" / "calc" / "__init__.py").write_text(LIB)
    (root / "tests").mkdir()
    (root / "tests" / "test_calc.py").write_text(TESTS)
    (root / "pyproject.toml").write_text(
        '[project]\nname = "calc"\nversion = "0"\n\n[tool.pytest.ini_options]\ntestpaths = ["tests"]\n'
    )
    write_producer_protocol(root, tests_extra=f", tooling: {tooling}")
    git(root, "add", "-A")
    git(root, "commit", "-q", "-m", "base")
    return Library(root, cli)


@pytest.fixture
def library(tmp_path: Path, snodo_cli: Callable[..., CliResult]) -> Library:
    return make_library(tmp_path / "lib", snodo_cli)
