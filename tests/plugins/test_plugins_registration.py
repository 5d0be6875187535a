"""Every built-in plugin loads through the real ``snodo`` entry points and declares itself
honestly; none reaches past ``snodo.api`` or imports litellm before a model is called."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

from snodo.plugin.host import PluginHost

PLUGINS_DIR = Path(__file__).resolve().parents[2] / "plugins"


def test_every_builtin_is_registered_by_its_entry_point(host: PluginHost) -> None:
    ours = ("mock", "litellm", "opencode", "pytest", "acceptance", "protocol", "llm", "predicates")
    assert not [f for f in host.failures() if any(f'"{name}"' in f[0] for name in ours)]
    assert {"mock", "litellm", "opencode"} <= set(host.coders())
    assert {"pytest", "acceptance", "protocol", "llm"} <= set(host.validators())
    assert {"files_in_scope", "tests_exist_for_modified", "no_secrets_in_diff"} <= set(host.predicates())
    for name in ("mock", "litellm", "opencode"):
        assert host.owner_of("coder", name) == name
    for name in ("pytest", "acceptance", "protocol", "llm"):
        assert host.owner_of("validator", name) == name
    assert host.owner_of("predicate", "no_secrets_in_diff") == "predicates"
    assert host.owner_of("validator", "git-hooks") == "git_hooks"
    info = {row.name: row for row in host.info()}
    assert info["litellm"].distribution == "snodo-governance"
    assert info["predicates"].predicates == (
        "files_in_scope",
        "no_secrets_in_diff",
        "tests_exist_for_modified",
    )


def test_coder_capabilities_are_declared(host: PluginHost) -> None:
    mock = host.coder("mock").capabilities
    assert mock.deterministic and not mock.needs_network and not mock.writes_in_place
    assert mock.settings == ("files", "delete")

    llm = host.coder("litellm").capabilities
    assert llm.needs_network and not llm.deterministic and not llm.writes_in_place
    assert set(llm.settings) == {
        "model",
        "temperature",
        "max_turns",
        "timeout",
        "api_base",
        "api_key_env",
        "max_retries",
        "stream",
        "mock_response",
    }

    oc = host.coder("opencode").capabilities
    assert oc.writes_in_place and not oc.commits_own_changes
    assert [(p.name, p.install_hint) for p in oc.required_programs] == [("opencode", "npm install -g opencode-ai")]
    assert set(oc.settings) == {"model", "timeout", "silence_timeout", "max_requests", "extra_args", "env"}


def test_validator_declarations(host: PluginHost) -> None:
    v = host.validators()
    assert v["llm"].needs_model and not v["llm"].deterministic
    assert not v["pytest"].needs_model and v["pytest"].deterministic
    assert not v["acceptance"].needs_model and not v["protocol"].needs_model
    assert v["pytest"].settings == ("command", "python", "pythonpath", "timeout", "plugins", "held_out")
    assert v["command"].settings == ("command", "timeout") and v["command"].deterministic
    assert "mock_response" in v["llm"].settings and "mock_response" in v["acceptance"].settings


def test_plugins_import_only_the_public_api() -> None:
    offending = []
    pattern = re.compile(r"^\s*(?:from|import)\s+(snodo(?:\.[\w.]+)?)\b", re.MULTILINE)
    for path in PLUGINS_DIR.rglob("*.py"):
        for module in pattern.findall(path.read_text()):
            if module != "snodo.api":
                offending.append(f"{path.relative_to(PLUGINS_DIR)}: {module}")
    assert offending == []


def test_loading_the_plugins_does_not_import_litellm() -> None:
    code = (
        "import sys\n"
        "from snodo.plugin.host import get_plugin_manager\n"
        "host = get_plugin_manager()\n"
        "assert {'mock', 'litellm', 'opencode'} <= set(host.coders()), host.failures()\n"
        "import snodo_plugins._model, snodo_plugins.coders.litellm_coder\n"
        "import snodo_plugins.validators.llm_judge\n"
        "heavy = sorted(m for m in ('litellm', 'openai') if m in sys.modules)\n"
        "assert not heavy, heavy\n"
    )
    proc = subprocess.run([sys.executable, "-c", code], check=False, capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
