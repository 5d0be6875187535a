"""Import boundaries the design depends on, checked on the real modules."""

from __future__ import annotations

import json
import pkgutil
import re
import subprocess
import sys
from pathlib import Path

import snodo

SNODO = Path(snodo.__file__).parent
SIGNING = {"snodo.authorize_signing", "snodo.cli.authorize_cmd"}


def all_core_modules() -> list[str]:
    return sorted(
        m.name
        for m in pkgutil.walk_packages([str(SNODO)], prefix="snodo.")
        if m.name not in SIGNING and not m.name.endswith("__main__")
    )


def test_nothing_but_authorize_loads_the_private_key_code() -> None:
    """The MCP server, the engine and every other module can be imported — together — without
    the module that reads the decision private key ever loading."""
    modules = all_core_modules()
    assert "snodo.engine.loop" in modules and "snodo.governance.service" in modules
    code = (
        "import importlib, json, sys\n"
        f"for name in {modules!r}:\n"
        "    importlib.import_module(name)\n"
        "print(json.dumps(sorted(sys.modules)))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    loaded = set(json.loads(out.stdout))
    assert not loaded & {"snodo.authorize_signing"}


def test_core_never_imports_a_builtin_plugin() -> None:
    """No import of a built-in plugin or the kit, at any depth (``snodo plugin new`` only
    writes the kit's name into the files it generates)."""
    imports = re.compile(
        r"^\s*(from|import)\s+(snodo_plugins|snodo_conformance)\b|import_module\(\s*[\"']snodo_(plugins|conformance)",
        re.M,
    )
    offenders = [str(p) for p in SNODO.rglob("*.py") if imports.search(p.read_text())]
    assert offenders == []
    assert not [p for p in SNODO.rglob("*.py") if "snodo_plugins" in p.read_text()]


def test_run_process_names_a_missing_working_directory(tmp_path: Path) -> None:
    import pytest

    from snodo.api import EnvironmentProblem, run_process

    with pytest.raises(EnvironmentProblem) as info:
        run_process(["true"], cwd=tmp_path / "gone", timeout=5)
    assert "working directory" in str(info.value) and "gone" in str(info.value)


def test_importing_the_core_loads_no_model_sdk_mcp_sdk_or_builtin_plugin() -> None:
    """Every core module imports without litellm, the MCP SDK or a built-in plugin; only the MCP
    server adaptor loads the MCP SDK, and even it loads neither litellm nor a plugin. (Planning
    goes through the ``snodo_planner`` hook, so the planner no longer reaches for litellm.)"""
    modules = [m for m in all_core_modules() if m != "snodo.mcp.server"]
    assert "snodo.engine.plans" in modules and "snodo.core_plugin" in modules
    code = (
        "import importlib, json, sys\n"
        f"for name in {modules!r}:\n"
        "    importlib.import_module(name)\n"
        "before = sorted(sys.modules)\n"
        "importlib.import_module('snodo.mcp.server')\n"
        "print(json.dumps([before, sorted(sys.modules)]))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    before, after = (set(names) for names in json.loads(out.stdout))

    def roots(loaded: set[str]) -> set[str]:
        return {name.split(".")[0] for name in loaded} & {"litellm", "openai", "mcp", "snodo_plugins"}

    assert roots(before) == set()
    assert roots(after) == {"mcp"}


def test_one_git_runner() -> None:
    """Only snodo/gitrun.py starts git: every other module of the core goes through it (and
    its time limit). Catches argv lists that start with "git" and shell strings alike."""
    import re

    root = Path(__file__).resolve().parent.parent / "snodo"
    starts_git = re.compile(r"""[\[(]\s*["']git["']\s*[,\]]|["']git\s+-C\b""")
    offenders = []
    for path in sorted(root.rglob("*.py")):
        if path.name == "gitrun.py":
            continue
        for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1):
            if starts_git.search(line):
                offenders.append(f"{path.relative_to(root.parent)}:{number}: {line.strip()}")
    assert offenders == [], "git started outside snodo/gitrun.py:\n" + "\n".join(offenders)
    assert re.search(starts_git, 'subprocess.run(["git", "-C", str(repo)])')  # the check itself bites
