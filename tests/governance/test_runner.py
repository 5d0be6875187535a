"""The one runner fails closed: crashes, overruns and missing plugins are errors, never passes."""

from __future__ import annotations

import threading
import time
from pathlib import Path

import pytest

from snodo.api import ValidatorSpec, Verdict, hookimpl
from snodo.governance.policy import classify
from snodo.governance.runner import PhaseInput, run_phase
from snodo.plugin.host import get_plugin_manager
from snodo.protocol import parse_protocol

release = threading.Event()


class JudgePlugin:
    """Validator types whose behaviour the protocol chooses through ``tooling``."""

    @hookimpl
    def snodo_validators(self):  # type: ignore[no-untyped-def]
        for name in ("fixed", "raises", "sleeps", "returns-none"):
            yield ValidatorSpec(name=name, description=name)

    @hookimpl
    def snodo_validate(self, request):  # type: ignore[no-untyped-def]
        kind, tooling = request.validator.validator_type, request.validator.tooling
        if kind == "fixed":
            return Verdict(severity=tooling["severity"], justification=f"fixed {tooling['severity']}")
        if kind == "raises":
            raise RuntimeError("validator exploded")
        if kind == "sleeps":
            release.wait(tooling["seconds"])
            return Verdict(severity="pass", justification="woke up too late")
        return None


def protocol_with(validators: str, cap: str = "") -> str:
    return (
        "protocol_id: p\nname: p\nmodes: [{mode_id: m, validators: [a, b, c]}]\nvalidators:\n" + validators
    ).replace("CAP", cap)


@pytest.fixture
def host():  # type: ignore[no-untyped-def]
    return get_plugin_manager(entrypoints=False, plugins=[JudgePlugin()])


def run(host, text: str, tmp_path: Path):  # type: ignore[no-untyped-def]
    proto = parse_protocol(text)
    return run_phase(
        host,
        PhaseInput(
            protocol=proto, mode=proto.modes[0], phase="pre_execute", task_id="t", task_spec="spec", workspace=tmp_path
        ),
    )


@pytest.mark.parametrize(
    "bad",
    [
        "{validator_id: c, validator_type: raises, severity_cap: pass}",
        "{validator_id: c, validator_type: sleeps, severity_cap: pass, tooling: {timeout: 0.3, seconds: 30}}",
        "{validator_id: c, validator_type: not-installed, severity_cap: pass}",
        "{validator_id: c, validator_type: returns-none, severity_cap: pass}",
    ],
)
def test_faults_are_validator_error_even_capped_at_pass(host, bad: str, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    text = protocol_with(
        "  - {validator_id: a, validator_type: fixed, tooling: {severity: pass}}\n"
        "  - {validator_id: b, validator_type: fixed, tooling: {severity: pass}}\n"
        f"  - {bad}\n"
    )
    started = time.monotonic()
    results = run(host, text, tmp_path)
    assert time.monotonic() - started < 10
    assert [r.validator_id for r in results] == ["a", "b", "c"]
    assert results[2].severity == "error" and results[2].error
    for policy in ("unanimous", "majority", "quorum", "any"):
        assert classify(results, policy=policy).status == "validator_error"
    release.set()
    release.clear()


def test_error_messages_say_what_happened(host, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    text = protocol_with(
        "  - {validator_id: a, validator_type: raises}\n"
        "  - {validator_id: b, validator_type: sleeps, tooling: {timeout: 0.2, seconds: 30}}\n"
        "  - {validator_id: c, validator_type: ghost}\n"
    )
    a, b, c = run(host, text, tmp_path)
    assert "validator exploded" in (a.error or "")
    assert "timed out after 0.2s" in (b.error or "")
    assert "no validator type named 'ghost' is installed" in (c.error or "")
    release.set()
    release.clear()


def test_cap_lowers_and_keeps_the_original(host, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    text = protocol_with(
        "  - {validator_id: a, validator_type: fixed, tooling: {severity: blocker}, severity_cap: warn}\n"
        "  - {validator_id: b, validator_type: fixed, tooling: {severity: warn}, severity_cap: blocker}\n"
        "  - {validator_id: c, validator_type: fixed, tooling: {severity: pass}}\n"
    )
    a, b, c = run(host, text, tmp_path)
    assert (a.severity, a.severity_original) == ("warn", "blocker")
    assert (b.severity, b.severity_original) == ("warn", None)
    assert a.as_json()["severity_original"] == "blocker" and "severity_original" not in c.as_json()


def test_validators_run_concurrently(host, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    """Three validators that each wait for the same event: only concurrency lets them all finish."""
    barrier = threading.Barrier(3, timeout=5)

    class Rendezvous:
        @hookimpl
        def snodo_validators(self):  # type: ignore[no-untyped-def]
            yield ValidatorSpec(name="rendezvous", description="meets the others")

        @hookimpl
        def snodo_validate(self, request):  # type: ignore[no-untyped-def]
            if request.validator.validator_type != "rendezvous":
                return None
            barrier.wait()
            return Verdict(severity="pass", justification="met")

    h = get_plugin_manager(entrypoints=False, plugins=[Rendezvous()])
    text = protocol_with("".join(f"  - {{validator_id: {v}, validator_type: rendezvous}}\n" for v in "abc"))
    assert [r.severity for r in run(h, text, tmp_path)] == ["pass", "pass", "pass"]
