"""The settings rule has one home (``snodo.rules.settings``): break it through every door, get one message.

A third-party validator declares a typed setting (``max_lines``, a positive integer) the
way docs/plugins.md shows; a protocol gives it ``"twenty"``. The protocol loader
(``snodo protocol check``), the plugin itself (reached with a protocol that never went through
the loader) and the conformance kit must each refuse it with the same words. The same for a
coder's ``coder_config``: the loader, the engine and the mock coder's own preflight.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import pytest

from snodo.base.errors import CoderError, ProtocolError, ValidatorFault
from snodo.engine.loop import Engine
from snodo.governance.service import Project
from snodo.plugin.host import get_plugin_manager
from snodo.plugin.records import ValidationRequest
from snodo.protocol import LoadedProtocol, load_protocol, parse_protocol
from tests.conftest import git, make_repo

PLUGIN = """
from snodo.api import Setting, ValidatorFault, ValidatorSpec, Verdict, hookimpl

SETTINGS = (Setting("max_lines", "integer", default=20, help="longest file allowed"),)


@hookimpl
def snodo_validators():
    yield ValidatorSpec(name="line-limit", description="no file longer than max_lines", settings=SETTINGS)


@hookimpl
def snodo_validate(request):
    v = request.validator
    if v.validator_type != "line-limit":
        return None
    problems = Setting.tooling_problems(v.validator_id, v.validator_type, SETTINGS, v.tooling)
    if problems:
        raise ValidatorFault("; ".join(message for _key, message in problems))
    limit = Setting.with_defaults(SETTINGS, v.tooling)["max_lines"]
    long = [p.name for p in request.workspace.rglob("*.py") if len(p.read_text().splitlines()) > limit]
    if long:
        return Verdict(severity="blocker", justification=f"too long: {', '.join(sorted(long))}")
    return Verdict(severity="pass", justification=f"every file has at most {limit} lines")
"""

MESSAGE = "validator 'under-test' (type line-limit): tooling.max_lines: expected a positive integer, got str 'twenty'"

PROTOCOL = """\
protocol_id: p
name: p
modes: [{mode_id: m, validators: [under-test], coder: mock, coder_config: CODER_CONFIG}]
validators: [{validator_id: under-test, validator_type: VTYPE, tooling: TOOLING}]
"""


def _protocol(vtype: str = "line-limit", tooling: str = "{max_lines: twenty}", coder_config: str = "{}") -> str:
    return PROTOCOL.replace("VTYPE", vtype).replace("TOOLING", tooling).replace("CODER_CONFIG", coder_config)


def test_a_mistyped_validator_setting_is_refused_alike_by_loader_plugin_and_kit(
    install_plugins: Callable[[dict[str, str]], Path],
    kit: Callable[..., pytest.RunResult],
    tmp_path: Path,
) -> None:
    install_plugins({"line-limit": PLUGIN})
    host = get_plugin_manager()

    # door 1: the protocol loader (what `snodo protocol check` and every command run)
    path = tmp_path / "protocol.yml"
    path.write_text(_protocol())
    with pytest.raises(ProtocolError) as loaded:
        load_protocol(path, host)
    assert f"WF3: {path}:4: {MESSAGE} @ validators[0].tooling.max_lines" in loaded.value.problems

    # door 2: the plugin, handed a protocol that never went through the loader's check
    proto = parse_protocol(_protocol())
    request = ValidationRequest(
        validator=proto.validators[0],
        task_id="t",
        task_spec="s",
        phase="pre_execute",
        mode=proto.modes[0],
        protocol=proto,
        workspace=tmp_path,
    )
    with pytest.raises(ValidatorFault) as judged:
        host.validate(request)
    assert str(judged.value) == MESSAGE

    # door 3: the conformance kit, given the same tooling
    config = tmp_path / "validator.json"
    config.write_text(json.dumps({"tooling": {"max_lines": "twenty"}}))
    result = kit("--snodo-validator", "line-limit", f"--snodo-validator-config={config}", "-k", "registered")
    assert result.ret != 0
    assert MESSAGE in result.stdout.str()

    # and the declared type and default work when the setting is right
    proto = parse_protocol(_protocol(tooling="{}"))
    verdict = host.validate(
        ValidationRequest(
            validator=proto.validators[0],
            task_id="t",
            task_spec="s",
            phase="pre_execute",
            mode=proto.modes[0],
            protocol=proto,
            workspace=tmp_path,
        )
    )
    assert verdict is not None and verdict.justification == "every file has at most 20 lines"


CODER_MESSAGE = "coder 'mock': coder_config.delete: expected a list of strings, got str 'a.txt'"


def test_a_mistyped_coder_setting_is_refused_alike_by_loader_engine_and_coder(tmp_path: Path) -> None:
    host = get_plugin_manager()
    text = _protocol(vtype="protocol", tooling="{}", coder_config="{delete: a.txt}")

    path = tmp_path / "protocol.yml"
    path.write_text(text)
    with pytest.raises(ProtocolError) as loaded:
        load_protocol(path, host)
    assert f"WF3: {path}:3: mode 'm': {CODER_MESSAGE} @ modes[0].coder_config.delete" in loaded.value.problems

    with pytest.raises(CoderError) as built:
        config = parse_protocol(text).modes[0].coder_config
        host.pm.hook.snodo_preflight(mode=None, coder="mock", coder_config=config, validators=())
    assert str(built.value) == CODER_MESSAGE

    repo = make_repo(tmp_path / "repo")
    (repo / ".snodo").mkdir()
    (repo / ".snodo" / "protocol.yml").write_text(text)
    git(repo, "add", ".snodo")
    git(repo, "commit", "-q", "-m", "protocol")
    unchecked = LoadedProtocol(protocol=parse_protocol(text), path=repo / ".snodo" / "protocol.yml", root=repo)
    result = Engine(Project(unchecked, host)).run("add a hello module")
    assert (result.status, result.outcome) == ("halted", "environment_error")
    assert CODER_MESSAGE in result.message
