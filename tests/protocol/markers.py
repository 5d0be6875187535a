"""A real plugin, installed as a distribution on a directory put on ``PYTHONPATH``, whose
validator, coder and predicate each write a marker file when snodo uses them.

A refused protocol must stop every command *before* any validator, coder or predicate runs;
the markers are how the tests see that nothing ran (and, for an accepted protocol, that
the same plugins do run, so an absent marker means something).
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

MARKER_ENV = "SNODO_TEST_MARKERS"

PLUGIN_SOURCE = f'''
"""Marker plugin for the protocol tests: every use leaves a file in ${MARKER_ENV}."""
import os
from pathlib import Path

from snodo.api import CoderCapabilities, CoderResult, CoderSpec, FileOperation, PredicateResult, PredicateSpec, ValidatorSpec, Verdict, hookimpl


def _mark(name):
    folder = os.environ.get("{MARKER_ENV}")
    if folder:
        Path(folder, name).write_text("ran")


@hookimpl
def snodo_validators():
    yield ValidatorSpec(name="marker", description="passes and leaves a marker", settings=("command",))


@hookimpl
def snodo_validate(name, request):
    if name != "marker":
        return None
    _mark("validator-" + request.validator.validator_id)
    return Verdict(severity="pass", justification="the marker validator ran")


class MarkerCoder:
    def __init__(self, config):
        _mark("coder-built")

    def generate(self, request):
        _mark("coder-ran")
        op = FileOperation(op="write", path="marked.py", content="MARKED = True\\n")
        return CoderResult(operations=(op,), summary="wrote marked.py")


@hookimpl
def snodo_coders():
    yield CoderSpec(
        name="marker-coder",
        description="writes marked.py and leaves a marker",
        capabilities=CoderCapabilities(
            writes_in_place=False, commits_own_changes=False, settings=("model",)
        ),
    )


@hookimpl
def snodo_preflight(coder, coder_config):
    if coder == "marker-coder":
        MarkerCoder(coder_config)


@hookimpl
def snodo_generate(name, request):
    return MarkerCoder(request.config).generate(request)


@hookimpl
def snodo_check_predicate(name, context, params):
    _mark("predicate")
    return PredicateResult(ok=True, message="marker predicate ran")


@hookimpl
def snodo_predicates():
    yield PredicateSpec(name="marker_pred", description="passes and leaves a marker")
'''


def install_marker_plugin(site: Path) -> Path:
    """A real installed distribution (dist-info + entry point) on ``site``; returns ``site``."""
    info = site / "snodo_marker_plugin-1.0.dist-info"
    info.mkdir(parents=True, exist_ok=True)
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: snodo-marker-plugin\nVersion: 1.0\n")
    (info / "entry_points.txt").write_text("[snodo]\nmarker = snodo_marker_plugin\n")
    (site / "snodo_marker_plugin.py").write_text(PLUGIN_SOURCE)
    return site


def git(cwd: Path, *args: str) -> str:
    return subprocess.run(["git", "-C", str(cwd), *args], check=True, capture_output=True, text=True).stdout


def make_sample_project(root: Path, layout: str = "flat") -> Path:
    """A small git project with a passing test suite: ``calc/`` (flat) or ``src/calc/`` (src)."""
    root.mkdir(parents=True, exist_ok=True)
    git(root, "init", "-q", "-b", "main")
    git(root, "config", "user.email", "dev@example.com")
    git(root, "config", "user.name", "Dev")
    package = root / ("src/calc" if layout == "src" else "calc")
    package.mkdir(parents=True)
    (package / "__init__.py").write_text("def add(a: int, b: int) -> int:\n    return a + b\n")
    (root / "tests").mkdir()
    (root / "tests" / "test_calc.py").write_text(
        "from calc import add\n\n\ndef test_add() -> None:\n    assert add(1, 2) == 3\n"
    )
    pythonpath = '["src"]' if layout == "src" else '["."]'
    (root / "pyproject.toml").write_text(f"[tool.pytest.ini_options]\npythonpath = {pythonpath}\n")
    (root / "README.md").write_text("# calc\n")
    git(root, "add", "-A")
    git(root, "commit", "-q", "-m", "initial")
    return root


def snodo_env(home: Path, site: Path | None = None, markers: Path | None = None) -> dict[str, str]:
    env = {
        **os.environ,
        "SNODO_HOME": str(home),
        "LITELLM_LOCAL_MODEL_COST_MAP": "True",
        "COLUMNS": "200",
        "PYTHONDONTWRITEBYTECODE": "1",
    }
    if site is not None:
        env["PYTHONPATH"] = str(site)
    if markers is not None:
        env[MARKER_ENV] = str(markers)
    return env


def snodo_argv(*args: str) -> list[str]:
    return [sys.executable, "-m", "snodo", *args]
