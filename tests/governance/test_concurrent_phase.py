"""The validators of one phase start together, under a bound, and report in declared order.

The end-to-end case runs two real command validators (``sleep 2`` between two readings of
the clock, confined as every validator is) through the shared ``validate_task``: their
runs overlap, and the signed audit event still names each, in protocol order.
"""

from __future__ import annotations

import os
import signal
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest
from attrs import evolve

from snodo.api import ValidatorSpec, Verdict, hookimpl
from snodo.governance import runner
from snodo.governance.runner import PhaseInput, concurrency_limit, run_phase
from snodo.governance.service import Project, validate_task
from snodo.plugin.host import get_plugin_manager
from snodo.plugin.records import WorkspaceStatus
from snodo.protocol import load_protocol, parse_protocol
from snodo.state.audit import AuditLog
from tests.conftest import make_repo

SLEEPERS = """\
protocol_id: sleepers
name: sleepers
modes:
  - mode_id: m
    tools: [read, validate]
    validators: [first, second]
validators:
  - {validator_id: first, validator_type: command, tooling: {command: "sh -c 'date +%s.%N; sleep 2; date +%s.%N'"}}
  - {validator_id: second, validator_type: command, tooling: {command: "sh -c 'date +%s.%N; sleep 2; date +%s.%N'"}}
"""


def test_two_sleeping_command_validators_overlap_and_are_each_audited(tmp_path: Path) -> None:
    root = make_repo(tmp_path / "repo")
    (root / ".snodo").mkdir()
    (root / ".snodo" / "protocol.yml").write_text(SLEEPERS)
    plugins = get_plugin_manager()
    project = Project(load_protocol(root / ".snodo" / "protocol.yml", plugins), plugins, home=tmp_path / "home")
    validate_task(project, spec="warm up the sandbox", issue_token=False)
    outcome = validate_task(project, spec="sleep twice", issue_token=False)
    assert outcome.status == "pass", outcome.payload()
    # each check printed the clock as it started and as it ended: run one after the other,
    # one would start after the other ended, whatever the machine's load
    (a_start, a_end), (b_start, b_end) = (_clock(str(r.details["output_tail"])) for r in outcome.results)
    assert a_start < b_end and b_start < a_end, outcome.payload()
    assert [r.validator_id for r in outcome.results] == ["first", "second"]
    assert all(r.duration >= 1.9 for r in outcome.results)
    event = AuditLog(root / ".git" / "snodo" / "audit.log").records("validate")[-1]
    assert [r["validator_id"] for r in event["data"]["results"]] == ["first", "second"]
    assert [r["severity"] for r in event["data"]["results"]] == ["pass", "pass"]


def _clock(text: str) -> tuple[float, float]:
    stamps = [float(word) for word in text.split() if word.replace(".", "", 1).isdigit() and "." in word]
    assert len(stamps) >= 2, text
    return stamps[0], stamps[-1]


DIRTY = """\
protocol_id: dirty
name: dirty
modes:
  - mode_id: m
    tools: [read, validate]
    validators: [first, second, third]
validators:
  - {validator_id: first, validator_type: command, tooling: {command: "true"}}
  - {validator_id: second, validator_type: command, tooling: {command: "true"}}
  - {validator_id: third, validator_type: protocol}
"""


def test_the_validators_of_a_phase_share_one_read_of_the_tree_state(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Two pytest validators report the uncommitted changes from one git status, run by the
    runner with snodo's own git; a phase whose validators never ask runs none."""
    root = make_repo(tmp_path / "repo")
    (root / ".snodo").mkdir()
    (root / ".snodo" / "protocol.yml").write_text(DIRTY)
    (root / "scratch.txt").write_text("uncommitted\n")
    plugins = get_plugin_manager()
    protocol = load_protocol(root / ".snodo" / "protocol.yml", plugins).protocol
    statuses: list[tuple[str, ...]] = []
    real = runner.run_git

    def counting(repo: Path, *args: str, **kwargs: Any) -> Any:
        if "status" in args:
            statuses.append(args)
        return real(repo, *args, **kwargs)

    monkeypatch.setattr(runner, "run_git", counting)
    inp = PhaseInput(
        protocol=protocol, mode=protocol.mode("m"), phase="pre_execute", task_id="t", task_spec="s", workspace=root
    )
    results = run_phase(plugins, inp)
    assert [r.severity for r in results] == ["pass", "pass", "pass"], results
    assert [r.details.get("dirty_tree") for r in results[:2]] == [["?? .snodo/", "?? scratch.txt"]] * 2
    assert len(statuses) == 1
    statuses.clear()
    only_in_process = evolve(inp, mode=evolve(inp.mode, validators=("third",)))
    assert [r.severity for r in run_phase(plugins, only_in_process)] == ["pass"]
    assert statuses == []
    # A caller that knows the state exactly (the engine's copy, just restored and checked
    # clean) hands it over: no git, and what it said is what the validators report.
    known = evolve(inp, uncommitted=("?? handed.txt",))
    assert [r.details.get("dirty_tree") for r in run_phase(plugins, known)[:2]] == [["?? handed.txt"]] * 2
    assert statuses == []


def test_the_tree_state_is_read_once_and_bounded() -> None:
    reads: list[int] = []

    def read() -> tuple[str, ...]:
        reads.append(1)
        time.sleep(0.05)
        return tuple(f"?? f{i}" for i in range(80))

    status = WorkspaceStatus(read)
    with ThreadPoolExecutor(4) as pool:
        seen = list(pool.map(lambda _i: status.uncommitted(), range(8)))
    assert len(reads) == 1
    assert len(set(seen)) == 1 and len(seen[0]) == WorkspaceStatus.LIMIT


class Gauge:
    """Validator types that record how many of them run at once."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.now = self.peak = 0
        self.hang = threading.Event()

    @hookimpl
    def snodo_validators(self):  # type: ignore[no-untyped-def]
        yield ValidatorSpec(name="gauge", description="counts overlap")
        yield ValidatorSpec(name="hangs", description="never answers in time")
        yield ValidatorSpec(name="raises", description="crashes")

    @hookimpl
    def snodo_validate(self, request):  # type: ignore[no-untyped-def]
        kind = request.validator.validator_type
        if kind == "hangs":
            self.hang.wait(30)
            return Verdict(severity="pass", justification="far too late")
        if kind == "raises":
            time.sleep(0.05)
            raise RuntimeError("validator exploded")
        with self.lock:
            self.now += 1
            self.peak = max(self.peak, self.now)
        time.sleep(0.15)
        with self.lock:
            self.now -= 1
        return Verdict(severity="pass", justification=f"gauge {request.validator.validator_id}")


def phase(validators: list[tuple[str, str]], tmp_path: Path, timeout: float = 0.5) -> PhaseInput:
    ids = ", ".join(v for v, _ in validators)
    text = f"protocol_id: p\nname: p\nmodes: [{{mode_id: m, validators: [{ids}]}}]\nvalidators:\n" + "".join(
        f"  - {{validator_id: {v}, validator_type: {t}, tooling: {{timeout: {timeout}}}}}\n" for v, t in validators
    )
    proto = parse_protocol(text)
    return PhaseInput(
        protocol=proto, mode=proto.modes[0], phase="pre_execute", task_id="t", task_spec="s", workspace=tmp_path
    )


@pytest.mark.parametrize("limit", [1, 2, 3])
def test_no_more_than_the_limit_run_at_once(limit: int, tmp_path: Path) -> None:
    gauge = Gauge()
    host = get_plugin_manager(entrypoints=False, plugins=[gauge])
    inp = phase([(f"v{i}", "gauge") for i in range(6)], tmp_path)
    seen: list[str] = []
    results = run_phase(host, inp, limit=limit, progress=lambda msg, r: seen.append(msg) if r else None)
    assert gauge.peak == limit
    assert [r.validator_id for r in results] == [f"v{i}" for i in range(6)]
    assert [s.split(" ")[1] for s in seen] == [f"v{i}" for i in range(6)]  # progress in declared order too


def test_a_hung_or_crashing_validator_is_its_own_error_and_frees_its_slot(tmp_path: Path) -> None:
    gauge = Gauge()
    host = get_plugin_manager(entrypoints=False, plugins=[gauge])
    inp = phase([("stuck", "hangs"), ("boom", "raises"), ("a", "gauge"), ("b", "gauge")], tmp_path)
    try:
        stuck, boom, a, b = run_phase(host, inp, limit=1)
    finally:
        gauge.hang.set()
    assert stuck.severity == "error" and "timed out after 0.5s" in (stuck.error or "")
    assert boom.severity == "error" and "validator exploded" in (boom.error or "")
    assert (a.severity, b.severity) == ("pass", "pass")
    assert (a.validator_id, b.validator_id) == ("a", "b")


def test_the_default_bound_overlaps_a_few_even_on_a_small_machine() -> None:
    assert concurrency_limit(0) == 1 and concurrency_limit(1) == 1
    assert concurrency_limit(3) == 3
    assert 4 <= concurrency_limit(100) <= max(4, os.cpu_count() or 1)


class Interrupted(Exception):
    pass


def test_a_signal_interrupts_the_waiting_runner_at_once(tmp_path: Path) -> None:
    """What SIGINT does to `snodo run`: the runner's wait is interruptible, so the handler's
    exception (KeyboardInterrupt there, after which every child tree is killed) comes at once."""
    gauge = Gauge()
    host = get_plugin_manager(entrypoints=False, plugins=[gauge])
    inp = phase([("stuck", "hangs"), ("also", "hangs")], tmp_path, timeout=20)

    def interrupted(_signum: int, _frame: object) -> None:
        raise Interrupted

    previous = signal.signal(signal.SIGUSR1, interrupted)
    timer = threading.Timer(0.2, os.kill, (os.getpid(), signal.SIGUSR1))
    started = time.monotonic()
    try:
        timer.start()
        with pytest.raises(Interrupted):
            run_phase(host, inp)
    finally:
        signal.signal(signal.SIGUSR1, previous)
        gauge.hang.set()
    assert time.monotonic() - started < 10  # long before the validators' 20 s timeout
