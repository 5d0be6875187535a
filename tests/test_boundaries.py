"""Import boundaries the design depends on, checked on the real modules."""

from __future__ import annotations

import json
import pkgutil
import re
import subprocess
import sys
import tomllib
from pathlib import Path

import snodo

SNODO = Path(snodo.__file__).parent
SIGNING = {"snodo.cli.signing", "snodo.cli.authorize_cmd"}


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
    assert not loaded & {"snodo.cli.signing"}


def test_the_import_contracts_hold() -> None:
    """The layers are checked by import-linter (contracts in pyproject.toml), which reads every
    import statement, function-level ones included: a deferred import cannot hide a cycle."""
    root = Path(__file__).resolve().parent.parent
    lint = Path(sys.executable).with_name("lint-imports")
    out = subprocess.run([str(lint), "--no-cache"], cwd=root, capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stdout + out.stderr
    kept = re.findall(r"^(.+) KEPT$", out.stdout, re.M)
    contracts = tomllib.loads((root / "pyproject.toml").read_text())["tool"]["importlinter"]["contracts"]
    layers = next(c for c in contracts if c["name"] == "layers point down")
    # every package and module of snodo is placed: a new one cannot slip in unlayered
    assert layers["containers"] == ["snodo"] and layers["exhaustive"] is True
    for contract in (
        "the core never imports the built-in plugins, the conformance kit or litellm",
        "only the MCP server imports the mcp SDK",
        "state never imports governance or the engine",
        "the plugin interface never imports the engine or governance",
        "plugins and the kit import snodo only through snodo.api",
        "layers point down",
    ):
        assert contract in kept, out.stdout


def test_no_module_imports_itself_through_others() -> None:
    """No import cycle between any two of snodo's modules (the layers contract only sees
    packages), function-level imports included, those only a type checker reads left out."""
    import graphlib

    import grimp

    graph = grimp.build_graph("snodo", cache_dir=None, exclude_type_checking_imports=True)
    imports = {m: graph.find_modules_directly_imported_by(m) for m in graph.modules}
    graphlib.TopologicalSorter(imports).prepare()  # CycleError names the cycle


def test_the_plugin_host_loads_no_governance_engine_or_state() -> None:
    """``get_plugin_manager(entrypoints=False)`` builds a host from the plugin interface alone:
    no engine, no governance, no token store (it used to pull 37 modules through a cycle)."""
    code = (
        "import json, sys\n"
        "from snodo.plugin.host import get_plugin_manager\n"
        "get_plugin_manager(entrypoints=False).coders()\n"
        "print(json.dumps(sorted(m for m in sys.modules if m.startswith('snodo'))))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    loaded = json.loads(out.stdout)
    assert not [m for m in loaded if m.split(".")[1:2] in (["engine"], ["governance"], ["state"], ["cli"], ["mcp"])]
    # the workspace tools pull in proc (with procprep) and the sandbox backends
    assert len(loaded) <= 32, loaded


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
    assert "snodo.engine.plans" in modules and "snodo.plugin.core" in modules
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
    """Only snodo/git/runner.py starts git: every other module of the core goes through it (and
    its time limit). Catches argv lists that start with "git" and shell strings alike."""
    import re

    root = Path(__file__).resolve().parent.parent / "snodo"
    starts_git = re.compile(r"""[\[(]\s*["']git["']\s*[,\]]|["']git\s+-C\b""")
    offenders = []
    for path in sorted(root.rglob("*.py")):
        if path == root / "git" / "runner.py":
            continue
        for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1):
            if starts_git.search(line):
                offenders.append(f"{path.relative_to(root.parent)}:{number}: {line.strip()}")
    assert offenders == [], "git started outside snodo/git/runner.py:\n" + "\n".join(offenders)
    assert re.search(starts_git, 'subprocess.run(["git", "-C", str(repo)])')  # the check itself bites


#: Every module of snodo, its plugins and the kit that starts a process itself, and why it
#: is not :func:`snodo.process.runner.run_process` (which confines and time-limits agent content).
PROCESS_STARTERS = {
    "snodo/process/runner.py": "the process runner",
    "snodo/git/runner.py": "snodo's own hardened git, with a time limit",
    "snodo/engine/jobs.py": "snodo re-launching itself (python -I, working directory /)",
    "snodo/cli/demo_cmd.py": "snodo re-launching itself on the demo's throwaway repository",
    "snodo/sandbox/base.py": "the backends' probe: `true`, with a time limit",
    "conformance/harness.py": "the kit running `snodo` as a user would, with a time limit",
    "conformance/_support.py": "the kit's scratch repositories (git), with a time limit",
}


def test_processes_start_only_in_known_places() -> None:
    """No module starts a process outside the list above: a new one must go through
    run_process (confined, time-limited) or say here why it cannot."""
    starts = re.compile(
        r"subprocess\.(Popen|run|call|check_call|check_output)\(|os\.(posix_spawnp?|fork|system|spawn\w*|exec\w+)\(|_SYS_CLONE\)"
    )
    repo = Path(__file__).resolve().parent.parent
    found = {
        str(path.relative_to(repo))
        for top in ("snodo", "plugins", "conformance")
        for path in (repo / top).rglob("*.py")
        if starts.search(path.read_text(encoding="utf-8"))
    }
    assert found == set(PROCESS_STARTERS), sorted(found ^ set(PROCESS_STARTERS))
    assert starts.search("os.execv(sys.executable, argv)")  # the check itself bites
