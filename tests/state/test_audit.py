from __future__ import annotations

import hashlib
import json
import subprocess
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from snodo.errors import AuditChainError, StateError
from snodo.state.audit import AuditLog


def oracle_hash(record: dict[str, Any]) -> str:
    """The chain rule of SPEC §6, written out independently of the implementation."""
    body = {k: v for k, v in record.items() if k != "hash"}
    text = json.dumps(body, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def lines(path: Path) -> list[str]:
    return path.read_text(encoding="utf-8").splitlines(keepends=True)


@pytest.fixture
def log(project: Path) -> AuditLog:
    return AuditLog(project / ".snodo" / "audit.log")


def filled(log: AuditLog, count: int = 6) -> AuditLog:
    for i in range(count):
        log.append("validate", mode="dev", data={"i": i, "note": "é ünïcode"})
    return log


def test_absent_log_verifies_empty(log: AuditLog) -> None:
    report = log.verify()
    assert (report.ok, report.count, report.line) == (True, 0, None)
    assert log.records() == []


def test_records_follow_the_spec_chain(log: AuditLog) -> None:
    filled(log, 3)
    log.append("session_started", mode=None, data={})
    records = [json.loads(line) for line in lines(log.path)]
    assert [r["seq"] for r in records] == [0, 1, 2, 3]
    assert records[0]["prev"] == "0" * 64
    for before, record in zip([None, *records], records, strict=False):
        assert set(record) == {"seq", "ts", "event", "mode", "data", "prev", "hash"}
        assert record["hash"] == oracle_hash(record)
        if before is not None:
            assert record["prev"] == before["hash"]
    assert log.verify().ok and log.verify().count == 4


def test_records_filters(log: AuditLog) -> None:
    filled(log, 3)
    log.append("halt", mode="dev", data={"outcome": "blocker"})
    assert [r["data"]["outcome"] for r in log.records(event="halt")] == ["blocker"]
    assert [r["seq"] for r in log.records(last=2)] == [2, 3]


def test_unserialisable_data_is_refused_and_nothing_appended(log: AuditLog) -> None:
    filled(log, 1)
    with pytest.raises(StateError, match="not JSON-serialisable"):
        log.append("validate", mode="dev", data={"when": object()})
    assert len(lines(log.path)) == 1 and log.verify().ok


def test_threads_append_without_losing_events(log: AuditLog) -> None:
    def work(instance: AuditLog) -> None:
        for i in range(50):
            instance.append("tool_call", mode="dev", data={"i": i})

    instances = [log, log, AuditLog(log.path), AuditLog(log.path)]
    threads = [threading.Thread(target=work, args=(inst,)) for inst in instances]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    report = log.verify()
    assert report.ok and report.count == 200


@pytest.mark.slow
def test_eight_processes_append_4000_events(log: AuditLog, spawn: Callable[..., subprocess.Popen[str]]) -> None:
    workers = [spawn("audit-append", log.path, 500, f"w{n}") for n in range(8)]
    for worker in workers:
        _, err = worker.communicate(timeout=120)
        assert worker.returncode == 0, err
    report = log.verify()
    assert (report.ok, report.count) == (True, 4000), report
    records = log.records()
    assert [r["seq"] for r in records] == list(range(4000))
    per_worker = {f"w{n}": [r["data"]["i"] for r in records if r["data"]["worker"] == f"w{n}"] for n in range(8)}
    assert all(seen == list(range(500)) for seen in per_worker.values())


# ------------------------------------------------------------------ tampering


def rewrite(path: Path, new_lines: list[str]) -> None:
    path.write_text("".join(new_lines), encoding="utf-8")


def assert_refuses_append(log: AuditLog, line: int) -> None:
    before = log.path.read_bytes()
    with pytest.raises(AuditChainError) as caught:
        AuditLog(log.path).append("validate", mode="dev", data={})
    assert caught.value.line == line
    assert log.path.read_bytes() == before


def test_edited_event_is_detected(log: AuditLog) -> None:
    filled(log)
    content = lines(log.path)
    record = json.loads(content[2])
    record["data"]["i"] = 99
    content[2] = json.dumps(record, separators=(",", ":"), ensure_ascii=False) + "\n"
    rewrite(log.path, content)
    report = log.verify()
    assert (report.ok, report.line, report.count) == (False, 3, 2)
    assert "hash" in report.reason
    assert_refuses_append(log, 3)


def test_deleted_middle_line_is_detected(log: AuditLog) -> None:
    filled(log)
    content = lines(log.path)
    del content[3]
    rewrite(log.path, content)
    report = log.verify()
    assert (report.ok, report.line) == (False, 4)
    assert "seq is 4, expected 3" in report.reason
    assert_refuses_append(log, 4)


def test_truncated_tail_is_detected(log: AuditLog) -> None:
    filled(log)
    rewrite(log.path, lines(log.path)[:4])
    report = log.verify()
    assert (report.ok, report.count, report.line) == (False, 4, 5)
    assert "truncated" in report.reason
    assert_refuses_append(log, 5)


def test_deleted_log_with_head_is_truncation(log: AuditLog) -> None:
    filled(log, 2)
    log.path.unlink()
    report = log.verify()
    assert not report.ok and report.line == 1 and "truncated" in report.reason


def test_not_json_line_is_detected(log: AuditLog) -> None:
    filled(log, 3)
    content = lines(log.path)
    content[1] = "garbage\n"
    rewrite(log.path, content)
    report = log.verify()
    assert (report.ok, report.line) == (False, 2) and "not valid JSON" in report.reason


def test_torn_last_line_is_detected(log: AuditLog) -> None:
    filled(log, 3)
    with log.path.open("a", encoding="utf-8") as handle:
        handle.write('{"seq":3,"ts":')
    report = log.verify()
    assert (report.ok, report.line) == (False, 4) and "incomplete" in report.reason


def test_append_interrupted_before_its_head_is_completed_later(log: AuditLog) -> None:
    """A crash between writing the line and writing the head leaves the log one ahead."""
    filled(log, 3)
    old_head = log.head_path.read_bytes()
    log.append("validate", mode="dev", data={"i": 3})
    log.head_path.write_bytes(old_head)
    assert log.verify().ok and log.verify().count == 4
    record = AuditLog(log.path).append("validate", mode="dev", data={"i": 4})
    assert record["seq"] == 4
    assert json.loads(log.head_path.read_text())["seq"] == 4
    assert log.verify().ok


def test_records_beyond_the_head_are_detected(log: AuditLog) -> None:
    filled(log, 3)
    old_head = log.head_path.read_bytes()
    filled(log, 2)
    log.head_path.write_bytes(old_head)
    report = log.verify()
    assert (report.ok, report.line) == (False, 5)


def test_corrupt_head_is_reported(log: AuditLog) -> None:
    filled(log, 2)
    log.head_path.write_text("{")
    report = log.verify()
    assert not report.ok and report.line is None and "audit.head" in report.reason
    with pytest.raises(AuditChainError, match=r"audit\.head"):
        log.append("validate", mode="dev", data={})


def test_a_process_notices_tampering_after_its_first_append(log: AuditLog) -> None:
    """Later appends are incremental, but a changed size or last line is still caught."""
    filled(log)
    content = lines(log.path)
    del content[1]
    rewrite(log.path, content)
    with pytest.raises(AuditChainError):
        log.append("validate", mode="dev", data={})

    fresh = AuditLog(log.path.with_name("other.log"))
    filled(fresh, 3)
    content = lines(fresh.path)
    content[-1] = content[-1].replace('"event":"validate"', '"event":"validatf"')  # same size
    assert len(content[-1]) == len(lines(fresh.path)[-1])
    rewrite(fresh.path, content)
    with pytest.raises(AuditChainError, match="line 3"):
        fresh.append("validate", mode="dev", data={})
