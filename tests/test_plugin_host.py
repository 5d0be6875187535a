"""The plugin host: entry points, isolation of broken plugins, conflicts, strict mode, dispatch."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from snodo.api import (
    ArtifactContext,
    DroppedOperation,
    FileOperation,
    ValidatorSpec,
    Verdict,
    hookimpl,
)
from snodo.base.errors import PluginError
from snodo.plugin.host import get_plugin_manager

BUILTINS = {"mock", "litellm", "opencode", "pytest", "acceptance", "protocol", "llm", "predicates"}


def install_fake_dist(site: Path, dist: str, entry_points: dict[str, str], modules: dict[str, str]) -> None:
    """A real installed distribution (dist-info + entry_points.txt) on a directory put on sys.path."""
    info = site / f"{dist.replace('-', '_')}-1.0.dist-info"
    info.mkdir(parents=True)
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {dist}\nVersion: 1.0\n")
    (info / "entry_points.txt").write_text(
        "[snodo]\n" + "".join(f"{name} = {target}\n" for name, target in entry_points.items())
    )
    for mod, code in modules.items():
        (site / f"{mod}.py").write_text(code)


def run_plugins_json(site: Path, cwd: Path, **env: str) -> subprocess.CompletedProcess[str]:
    full = {**os.environ, "PYTHONPATH": str(site), **env}
    return subprocess.run(
        [sys.executable, "-m", "snodo", "plugins", "--json"],
        cwd=cwd,
        env=full,
        capture_output=True,
        text=True,
        timeout=60,
    )


def test_builtins_are_listed_through_entry_points(tmp_path: Path) -> None:
    r = run_plugins_json(tmp_path, tmp_path)
    assert r.returncode == 0, r.stderr
    import json

    rows = {p["name"]: p for p in json.loads(r.stdout)["plugins"]}
    assert set(rows) >= BUILTINS
    for name in BUILTINS:
        assert rows[name]["status"] == "ok", rows[name]
        assert rows[name]["distribution"] == "snodo-governance"
        assert rows[name]["version"]
    assert rows["mock"]["registers"]["coders"] == ["mock"]
    assert rows["mock"]["capabilities"]["mock"]["deterministic"] is True
    assert rows["opencode"]["capabilities"]["opencode"]["writes_in_place"] is True
    assert rows["pytest"]["registers"]["validators"] == ["pytest"]
    assert set(rows["predicates"]["registers"]["predicates"]) == {
        "files_in_scope",
        "tests_exist_for_modified",
        "no_secrets_in_diff",
    }


def test_broken_third_party_plugin_is_reported_and_the_rest_work(tmp_path: Path) -> None:
    site = tmp_path / "site"
    install_fake_dist(
        site,
        "snodo-broken",
        {"broken": "snodo_broken_plugin"},
        {"snodo_broken_plugin": "raise ImportError('this plugin is broken on purpose')\n"},
    )
    r = run_plugins_json(site, tmp_path)
    assert r.returncode == 0, r.stderr
    import json

    rows = {p["name"]: p for p in json.loads(r.stdout)["plugins"]}
    assert rows["broken"]["status"] == "failed"
    assert rows["broken"]["distribution"] == "snodo-broken"
    assert 'Error importing plugin "broken"' in rows["broken"]["error"]
    assert "broken on purpose" in rows["broken"]["error"]
    assert all(rows[n]["status"] == "ok" for n in BUILTINS)
    strict = run_plugins_json(site, tmp_path, SNODO_STRICT_PLUGINS="1")
    assert strict.returncode != 0
    error = json.loads(strict.stdout)  # --json: the error is the one object on stdout
    assert "broken" in error["error"] and error["exit_code"] == strict.returncode
    assert "Traceback" not in strict.stderr


class GoodValidator:
    @hookimpl
    def snodo_validators(self):  # type: ignore[no-untyped-def]
        yield ValidatorSpec(name="always-pass", description="passes")

    @hookimpl
    def snodo_validate(self, request):  # type: ignore[no-untyped-def]
        if request.validator.validator_type != "always-pass":
            return None
        return Verdict(severity="pass", justification="fine")


class Hijacker:
    """Answers every validation request: the host must not let it speak for other types."""

    @hookimpl
    def snodo_validators(self):  # type: ignore[no-untyped-def]
        yield ValidatorSpec(name="hijacker", description="answers for everyone")

    @hookimpl
    def snodo_validate(self, request):  # type: ignore[no-untyped-def]
        return Verdict(severity="blocker", justification="hijacked")


def test_validate_dispatches_only_to_the_registering_plugin() -> None:
    from snodo.plugin.records import ValidationRequest
    from snodo.protocol import parse_protocol

    host = get_plugin_manager(entrypoints=False, plugins=[GoodValidator(), Hijacker()])
    proto = parse_protocol(
        "protocol_id: p\nname: p\nmodes: [{mode_id: m, validators: [v]}]\n"
        "validators: [{validator_id: v, validator_type: always-pass}]\n"
    )
    req = ValidationRequest(
        validator=proto.validators[0],
        task_id="t",
        task_spec="s",
        phase="pre_execute",
        mode=proto.modes[0],
        protocol=proto,
        workspace=Path("."),
    )
    verdict = host.validate(req)
    assert verdict is not None and verdict.justification == "fine"


def test_name_conflicts_name_both_plugins() -> None:
    class Twin(GoodValidator):
        pass

    host = get_plugin_manager(entrypoints=False, plugins=[GoodValidator(), Twin()])
    with pytest.raises(PluginError) as info:
        host.validator("always-pass")
    assert "registered by both" in str(info.value)
    assert str(info.value).endswith("uninstall one of them")  # the one remedy there is
    assert len(host.failures()) == 1


def test_unknown_hook_and_bad_registration_are_isolated() -> None:
    class Misspelled:
        @hookimpl
        def snodo_validatorz(self):  # type: ignore[no-untyped-def]
            return []

    class BadRecord:
        @hookimpl
        def snodo_validators(self):  # type: ignore[no-untyped-def]
            return [{"name": "dict-not-record"}]

    host = get_plugin_manager(entrypoints=False, plugins=[Misspelled(), BadRecord(), GoodValidator()])
    errors = " | ".join(e for _who, e in host.failures())
    assert "unknown hook" in errors and "snodo_validatorz" in errors
    assert "must yield ValidatorSpec records" in errors
    assert list(host.validators()) == ["always-pass"]


def test_core_filter_drops_governance_paths(tmp_path: Path) -> None:
    class DropLocks:
        @hookimpl
        def snodo_filter_artifacts(self, operations, context):  # type: ignore[no-untyped-def]
            return [
                DroppedOperation(operation=op, reason="lock file") for op in operations if op.path.endswith(".lock")
            ]

    host = get_plugin_manager(entrypoints=False, plugins=[DropLocks()])
    ops = (
        FileOperation(op="write", path="src/ok.py", content="x = 1\n"),
        FileOperation(op="write", path=".snodo/protocol.yml", content="evil"),
        FileOperation(op="write", path="poetry.lock", content=""),
        FileOperation(op="delete", path="../outside.txt"),
    )
    kept, dropped = host.filter_artifacts(ops, ArtifactContext(workspace=tmp_path, task_id="t", mode_id="m"))
    assert kept == (ops[0],)
    reasons = {d.operation.path: d.reason for d in dropped}
    assert ".snodo/" in reasons[".snodo/protocol.yml"] and reasons["poetry.lock"] == "lock file"
    assert "../outside.txt" in reasons


def test_tracing_shows_registration_and_hook_calls(git_repo: Path) -> None:
    import json as _json

    subprocess.run([sys.executable, "-m", "snodo", "init"], cwd=git_repo, check=True, capture_output=True)
    r = subprocess.run(
        [sys.executable, "-m", "snodo", "validate", "add a hello module", "--json"],
        cwd=git_repo,
        env={**os.environ, "SNODO_TRACE_PLUGINS": "1"},
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert r.returncode == 0, r.stderr
    assert _json.loads(r.stdout)["status"] == "pass"  # tracing never pollutes --json
    assert "snodo_coders mock" in r.stderr
    assert "snodo_validate" in r.stderr
