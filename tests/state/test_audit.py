from __future__ import annotations

import base64
import hashlib
import json
import os
import shutil
import subprocess
import sys
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from snodo.base.errors import AuditChainError, StateError
from snodo.state import audit_chain
from snodo.state.audit import AuditLog
from snodo.state.audit_chain import read_anchor, slots


def oracle_hash(record: dict[str, Any]) -> str:
    """The chain rule of SPEC §6, written out independently of the implementation."""
    body = {k: v for k, v in record.items() if k != "hash"}
    text = json.dumps(body, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def lines(path: Path) -> list[str]:
    return path.read_text(encoding="utf-8").splitlines(keepends=True)


def parsed(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in lines(path)]


def dump(record: dict[str, Any]) -> str:
    return json.dumps(record, separators=(",", ":"), ensure_ascii=False) + "\n"


def rechain(records: list[dict[str, Any]]) -> list[str]:
    """What an attacker with write access but no key can do: renumber, relink, rehash all."""
    prev = "0" * 64
    out = []
    for seq, original in enumerate(records):
        record = {**original, "seq": seq, "prev": prev}
        record["hash"] = prev = oracle_hash(record)
        out.append(dump(record))
    return out


@pytest.fixture
def log(project: Path) -> AuditLog:
    return AuditLog(project / ".git" / "snodo" / "audit.log")


def filled(log: AuditLog, count: int = 6) -> AuditLog:
    for i in range(count):
        log.append("validate", mode="dev", data={"i": i, "note": "é ünïcode"})
    return log


@pytest.mark.parametrize(
    "data",
    [
        {},
        {"mode": "x", "a": {"mode": None, "z": [1, {"mode": ',"mode":'}]}},
        {"text": ',"mode":"fake","prev":"' + "0" * 64 + '"', "é": "ü\u2028", "n": [None, True, 1.5]},
    ],
)
@pytest.mark.parametrize("mode", [None, "producer", 'a,"mode":b'])
def test_a_line_is_made_from_one_encoding_exactly_as_the_format_says(data: dict[str, Any], mode: str | None) -> None:
    """The appender builds each line's hash and bytes from one encoding of the six hashed
    fields; they are exactly the documented hash and canonical line, and the offline check
    reads them back."""
    from snodo.state.atomic import canonical_json
    from snodo.state.audit_chain import fast_link, linked_line

    record = {"seq": 7, "ts": "2026-12-02T00:00:00.000000+00:00", "event": "e", "mode": mode, "data": data}
    record["prev"] = "a" * 64
    digest, line = linked_line(record)
    assert digest == oracle_hash(record)
    assert line == canonical_json({**record, "hash": digest}) + b"\n"
    assert fast_link(line, 8, "a" * 64) == (digest, False)
    # the data's own encoding, made once when the event was drafted, put in front as it is
    assert linked_line(record, canonical_json(data)) == (digest, line)


def test_absent_log_verifies_empty(log: AuditLog) -> None:
    report = log.verify()
    assert (report.ok, report.count, report.line) == (True, 0, None)
    assert log.records() == []


def test_every_append_ends_with_a_signed_checkpoint(log: AuditLog) -> None:
    filled(log, 3)
    log.append("session_started", mode=None, data={})
    records = parsed(log.path)
    assert [r["event"] for r in records] == ["validate", "checkpoint"] * 3 + ["session_started", "checkpoint"]
    assert [r["seq"] for r in records] == list(range(8))
    assert records[0]["prev"] == "0" * 64
    for before, record in zip([None, *records], records, strict=False):
        assert set(record) == {"seq", "ts", "event", "mode", "data", "prev", "hash"}
        assert record["hash"] == oracle_hash(record)
        if before is not None:
            assert record["prev"] == before["hash"]
    # The checkpoint's signature checks with the public key alone, over its documented payload.
    public = serialization.load_ssh_public_key((log.home / "keys" / "audit_ed25519.pub").read_bytes())
    last = records[-1]
    payload = (
        b"snodo audit checkpoint v1\n"
        + json.dumps(
            {"seq": last["seq"], "ts": last["ts"], "prev": last["prev"], "key": last["data"]["key"]},
            sort_keys=True,
            separators=(",", ":"),
        ).encode()
    )
    public.verify(base64.b64decode(last["data"]["signature"]), payload)  # type: ignore[union-attr]
    report = log.verify()
    assert (report.ok, report.count, report.checkpoints) == (True, 4, 4)
    assert [r["event"] for r in log.records()] == ["validate"] * 3 + ["session_started"]


def test_the_home_keeps_the_last_checkpoint(log: AuditLog) -> None:
    filled(log, 2)
    found = read_anchor(log.anchor_path)
    assert found is not None
    anchor = found.record
    last = parsed(log.path)[-1]
    assert (anchor["seq"], anchor["hash"], anchor["size"]) == (last["seq"], last["hash"], log.path.stat().st_size)
    assert anchor["log"] == os.path.realpath(log.path)
    assert log.anchor_path.is_relative_to(log.home)


def test_the_home_checkpoint_is_written_in_place_in_two_slots(log: AuditLog, monkeypatch: pytest.MonkeyPatch) -> None:
    """No rename per append (on ext4 one costs a flush); the slots take turns."""
    filled(log, 1)

    def no_rename(*_a: object, **_k: object) -> None:
        raise AssertionError("the home's checkpoint is written in place")

    monkeypatch.setattr(os, "replace", no_rename)
    monkeypatch.setattr(os, "rename", no_rename)
    written = []
    for _ in range(3):
        log.append("validate", mode="dev", data={})
        written.append([json.loads(p.read_text())["seq"] for p in slots(log.anchor_path)])
    # each append overwrites the older slot; the other keeps the previous checkpoint
    head = parsed(log.path)[-1]["seq"]
    assert [max(w) for w in written] == [head - 4, head - 2, head]
    assert all(abs(a - b) == 2 for a, b in written)
    assert log.verify().ok


def test_a_steady_append_reads_no_slot_and_a_slot_written_since_is_read(
    log: AuditLog, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The slots this process wrote last are written in turn without reading them; a slot
    any other writer touched since (its identity changed) is read again first."""
    filled(log, 2)
    reads: list[Path] = []
    real_read = audit_chain._read_slot

    def counted(path: Path) -> Any:
        reads.append(path)
        return real_read(path)

    monkeypatch.setattr(audit_chain, "_read_slot", counted)
    numbers = lambda: sorted(json.loads(p.read_text())["write"] for p in slots(log.anchor_path))  # noqa: E731
    before = numbers()
    log.append("validate", mode="dev", data={})
    assert reads == []
    assert numbers() == [before[1], before[1] + 1]
    newer = max(slots(log.anchor_path), key=lambda p: json.loads(p.read_text())["write"])
    newer.write_text(newer.read_text())  # the same content, written by someone else: a new ctime
    log.append("validate", mode="dev", data={})
    assert set(slots(log.anchor_path)) <= set(reads)
    assert numbers() == [before[1] + 1, before[1] + 2]
    head = parsed(log.path)[-1]
    assert read_anchor(log.anchor_path).seq == head["seq"]  # type: ignore[union-attr]
    assert log.verify().ok


def test_a_home_checkpoint_cut_off_by_a_crash_falls_back_to_the_other_slot(log: AuditLog) -> None:
    filled(log, 3)
    first, second = slots(log.anchor_path)
    newer = max((first, second), key=lambda p: json.loads(p.read_text())["write"])
    text = newer.read_text()
    newer.write_text(text[: len(text) // 2] + " " * (len(text) - len(text) // 2))  # torn
    assert log.verify().ok
    log.append("validate", mode="dev", data={})  # rewrites the torn slot
    assert log.verify().ok
    assert json.loads(newer.read_text())["seq"] == parsed(log.path)[-1]["seq"]
    # a slot whose content does not match its checksum is not trusted either
    record = json.loads(newer.read_text())
    record["seq"] += 100
    newer.write_text(json.dumps(record))
    other = json.loads((second if newer == first else first).read_text())
    assert read_anchor(log.anchor_path).record == other  # type: ignore[union-attr]


def test_a_batch_is_one_write_one_signature_and_one_fsync(log: AuditLog, monkeypatch: pytest.MonkeyPatch) -> None:
    filled(log, 1)
    synced: list[int] = []
    real_fsync = os.fsync

    def counting_fsync(fd: int) -> None:  # fsync or fdatasync: either is one trip to the disk
        synced.append(fd)
        real_fsync(fd)

    monkeypatch.setattr(os, "fsync", counting_fsync)
    monkeypatch.setattr(os, "fdatasync", counting_fsync)
    with log.batch():
        first = log.append("tool_call", mode="dev", data={"tool": "validate_task"})
        with log.batch():  # nested batches join the outer one
            log.append("validate", mode="dev", data={"status": "pass"})
        log.append("token_issued", mode="dev", data={})
        assert len(lines(log.path)) == 2  # nothing written yet
    assert len(synced) == 1
    assert [r["event"] for r in parsed(log.path)[2:]] == ["tool_call", "validate", "token_issued", "checkpoint"]
    assert first["seq"] == 2 and first["hash"] == oracle_hash(first)  # completed when written
    assert log.verify().ok


def test_a_batch_is_written_even_when_its_block_raises(log: AuditLog) -> None:
    with pytest.raises(RuntimeError), log.batch():
        log.append("tool_call", mode="dev", data={})
        raise RuntimeError("the tool failed")
    assert [r["event"] for r in log.records()] == ["tool_call"] and log.verify().ok


def test_a_broken_log_refuses_a_batch_before_it_starts(log: AuditLog) -> None:
    filled(log, 2)
    content = lines(log.path)
    del content[0]
    log.path.write_text("".join(content))
    ran = []
    with pytest.raises(AuditChainError), log.batch():
        ran.append(True)
    assert ran == []


def test_a_failed_verify_counts_the_events_before_the_fault_by_their_event(log: AuditLog) -> None:
    """An event whose data holds the text ``"event":"checkpoint"`` is still an event."""
    log.append("validate", mode="dev", data={"event": "checkpoint"})
    filled(log, 2)
    content = lines(log.path)
    del content[4]
    log.path.write_text("".join(content))
    report = log.verify()
    assert (report.ok, report.line, report.count) == (False, 5, 2)


def test_records_filters(log: AuditLog) -> None:
    filled(log, 3)
    log.append("halt", mode="dev", data={"outcome": "blocker"})
    assert [r["data"]["outcome"] for r in log.records(event="halt")] == ["blocker"]
    assert [r["seq"] for r in log.records(last=2)] == [4, 6]
    assert len(log.records(event="checkpoint")) == 4


def test_large_strings_are_kept_as_digest_and_excerpt(log: AuditLog) -> None:
    big = "x" * 10_000_000
    record = log.append("tool_refused", mode="dev", data={"reason": big, "small": "ok"})
    assert record["data"]["small"] == "ok"
    assert record["data"]["reason"]["sha256"] == hashlib.sha256(big.encode()).hexdigest()
    assert record["data"]["reason"]["length"] == 10_000_000
    assert len(record["data"]["reason"]["excerpt"]) <= 256
    assert log.path.stat().st_size < 4096


def test_unserialisable_data_is_refused_and_nothing_appended(log: AuditLog) -> None:
    filled(log, 1)
    with pytest.raises(StateError, match="not JSON-serialisable"):
        log.append("validate", mode="dev", data={"when": object()})
    with pytest.raises(StateError, match="written by the log itself"):
        log.append("checkpoint", mode=None, data={})
    assert len(lines(log.path)) == 2 and log.verify().ok


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


def test_threads_batch_separately(log: AuditLog) -> None:
    """A batch belongs to its thread: two threads' events never end up in each other's batch."""
    barrier = threading.Barrier(2)

    def work(tag: str) -> None:
        with log.batch():
            log.append("tool_call", mode="dev", data={"tag": tag, "i": 0})
            barrier.wait()
            log.append("tool_call", mode="dev", data={"tag": tag, "i": 1})

    threads = [threading.Thread(target=work, args=(t,)) for t in ("a", "b")]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    events = [(r["event"], r["data"].get("tag")) for r in parsed(log.path)]
    assert events[:3] in ([("tool_call", t), ("tool_call", t), ("checkpoint", None)] for t in "ab")
    assert log.verify().ok


@pytest.mark.slow
def test_eight_processes_append_4000_events(log: AuditLog, spawn: Callable[..., subprocess.Popen[str]]) -> None:
    workers = [spawn("audit-append", log.path, 500, f"w{n}") for n in range(8)]
    for worker in workers:
        _, err = worker.communicate(timeout=240)
        assert worker.returncode == 0, err
    report = log.verify()
    assert (report.ok, report.count) == (True, 4000), report
    records = log.records()
    per_worker = {f"w{n}": [r["data"]["i"] for r in records if r["data"]["worker"] == f"w{n}"] for n in range(8)}
    assert all(seen == list(range(500)) for seen in per_worker.values())


# ------------------------------------------------------------------ tampering
#
# Each manipulation is what someone with write access to the project (an agent, a script)
# but not to $SNODO_HOME can do. `snodo audit verify` runs as a real subprocess and must
# name the line and the reason.


def _edit(path: Path, home: Path) -> None:
    content = lines(path)
    record = json.loads(content[4])
    record["data"]["i"] = 99
    content[4] = dump(record)
    path.write_text("".join(content))


def _reorder(path: Path, home: Path) -> None:
    content = lines(path)
    content[2], content[4] = content[4], content[2]
    path.write_text("".join(content))


def _forged_append(path: Path, home: Path) -> None:
    """One forged line with a correctly recomputed hash; the home's checkpoint untouched."""
    last = parsed(path)[-1]
    forged = {"seq": last["seq"] + 1, "ts": last["ts"], "event": "decision_recorded", "mode": "dev"}
    forged |= {"data": {"decision": "approve"}, "prev": last["hash"]}
    forged["hash"] = oracle_hash(forged)
    with path.open("a") as handle:
        handle.write(dump(forged))


def _forged_appends_with_own_checkpoint(path: Path, home: Path) -> None:
    """Forged lines closed by a checkpoint the forger signed with a key of their own."""
    records = parsed(path)
    prev = records[-1]["hash"]
    key = Ed25519PrivateKey.generate()
    raw = key.public_key().public_bytes(serialization.Encoding.Raw, serialization.PublicFormat.Raw)
    fingerprint = "sha256:" + hashlib.sha256(raw).hexdigest()
    out = []
    seq = records[-1]["seq"] + 1
    for i in range(2):
        forged = {"seq": seq, "ts": "2026-01-01T00:00:00+00:00", "event": "token_issued", "mode": "dev"}
        forged |= {"data": {"i": i}, "prev": prev}
        forged["hash"] = prev = oracle_hash(forged)
        out.append(dump(forged))
        seq += 1
    payload = (
        b"snodo audit checkpoint v1\n"
        + json.dumps(
            {"seq": seq, "ts": "2026-01-01T00:00:01+00:00", "prev": prev, "key": fingerprint},
            sort_keys=True,
            separators=(",", ":"),
        ).encode()
    )
    checkpoint = {"seq": seq, "ts": "2026-01-01T00:00:01+00:00", "event": "checkpoint", "mode": None}
    checkpoint |= {"data": {"key": fingerprint, "signature": base64.b64encode(key.sign(payload)).decode()}}
    checkpoint |= {"prev": prev}
    checkpoint["hash"] = oracle_hash(checkpoint)
    out.append(dump(checkpoint))
    with path.open("a") as handle:
        handle.write("".join(out))


def _truncate_with_checkpoint(path: Path, home: Path) -> None:
    """The last append cut off whole, so the log still ends on a validly signed checkpoint."""
    path.write_text("".join(lines(path)[:-2]))


def _recompute_after_edit(path: Path, home: Path) -> None:
    records = parsed(path)
    records[4]["data"]["i"] = 99
    path.write_text("".join(rechain(records)))


def _delete_middle_rechained(path: Path, home: Path) -> None:
    records = parsed(path)
    del records[4:6]  # one event and its checkpoint: the rest stays well formed
    path.write_text("".join(rechain(records)))


def _delete_log(path: Path, home: Path) -> None:
    path.unlink()


def _rollback(path: Path, home: Path) -> None:
    path.write_bytes((path.parent / "audit.log.old").read_bytes())


def _recompute_and_forget_the_home(path: Path, home: Path) -> None:
    """Even without the home's checkpoint (a fresh machine), a rewrite fails its signature."""
    _recompute_after_edit(path, home)
    shutil.rmtree(home / "audit")


TAMPERING: list[tuple[str, Callable[[Path, Path], None], int, str]] = [
    ("edited line", _edit, 5, "hash does not match"),
    ("reordered lines", _reorder, 3, "seq is 4, expected 2"),
    ("forged append, hash recomputed", _forged_append, 13, "not covered by a signed checkpoint"),
    ("forged appends signed with another key", _forged_appends_with_own_checkpoint, 15, "not by the trusted audit key"),
    ("truncated together with its checkpoint", _truncate_with_checkpoint, 11, "lines were removed"),
    ("whole chain recomputed after an edit", _recompute_after_edit, 12, "rewritten"),
    ("middle line deleted, rest re-chained", _delete_middle_rechained, 10, "signature does not verify"),
    ("log deleted", _delete_log, 1, "lines were removed"),
    ("rolled back to an older copy", _rollback, 9, "lines were removed"),
    ("recomputed, home checkpoint lost", _recompute_and_forget_the_home, 12, "signature does not verify"),
]


@pytest.mark.parametrize(("name", "tamper", "line", "reason"), TAMPERING, ids=[t[0] for t in TAMPERING])
def test_tampering_is_detected_by_audit_verify(
    log: AuditLog,
    snodo_cli: Callable[..., Any],
    name: str,
    tamper: Callable[[Path, Path], None],
    line: int,
    reason: str,
) -> None:
    filled(log, 4)
    shutil.copy(log.path, log.path.with_name("audit.log.old"))  # an older copy, for the rollback
    filled(log, 2)
    assert len(lines(log.path)) == 12
    intact = snodo_cli("audit", "verify", "--json", str(log.path), cwd=log.path.parent)
    assert intact.returncode == 0 and intact.json()["ok"], intact

    tamper(log.path, log.home)
    result = snodo_cli("audit", "verify", "--json", str(log.path), cwd=log.path.parent)
    assert result.returncode == 1, result
    report = result.json()
    assert report["ok"] is False
    assert report["line"] == line, report
    assert reason in report["reason"], report
    plain = snodo_cli("audit", "verify", str(log.path), cwd=log.path.parent)
    assert plain.returncode == 1 and f"line {line}" in plain.stdout, plain
    if log.path.exists() and name != "forged append, hash recomputed":
        # A new snodo process refuses to append to it, and leaves it as it is.
        before = log.path.read_bytes()
        append = subprocess.run(
            [sys.executable, "-c", APPEND, str(log.path)],
            capture_output=True,
            text=True,
            env={**os.environ, "SNODO_HOME": str(log.home)},
            timeout=60,
        )
        assert append.returncode == 3 and f"line {line}" in append.stdout, append
        assert log.path.read_bytes() == before


APPEND = """
import sys
from pathlib import Path
from snodo.base.errors import AuditChainError
from snodo.state.audit import AuditLog
from snodo.state import audit_chain
from snodo.state.audit_chain import read_anchor, slots
try:
    AuditLog(Path(sys.argv[1])).append("validate", mode="dev", data={})
except AuditChainError as exc:
    print(exc.message)
    sys.exit(3)
"""


# ------------------------------------------------------------------ crashes


def _interrupted_append(log: AuditLog, *, torn: bool) -> bytes:
    """What a crash in the middle of a batch's single write leaves: chained lines, no checkpoint."""
    last = parsed(log.path)[-1]
    prev, seq, out = last["hash"], last["seq"] + 1, ""
    for i in range(2):
        record = {"seq": seq + i, "ts": last["ts"], "event": "validate", "mode": "dev", "data": {"i": i}, "prev": prev}
        record["hash"] = prev = oracle_hash(record)
        out += dump(record)
    tail = (out + '{"seq":' if torn else out).encode()
    with log.path.open("ab") as handle:
        handle.write(tail)
    return tail


@pytest.mark.parametrize("torn", [False, True], ids=["whole-lines", "torn-line"])
def test_an_interrupted_append_is_moved_aside_by_the_next_writer(log: AuditLog, torn: bool) -> None:
    filled(log, 2)
    signed = log.path.read_bytes()
    tail = _interrupted_append(log, torn=torn)
    report = log.verify()
    assert not report.ok and report.line == 5

    AuditLog(log.path).append("validate", mode="dev", data={"after": "crash"})
    assert log.path.read_bytes().startswith(signed)
    events = log.records()
    assert [r["event"] for r in events] == ["validate", "validate", "audit_recovered", "validate"]
    recovered = events[2]["data"]
    kept = log.path.with_name(recovered["kept_in"])
    assert kept.read_bytes() == tail
    assert recovered["sha256"] == hashlib.sha256(tail).hexdigest() and recovered["first_line"] == 5
    assert log.verify().ok


def test_a_forgery_in_the_signed_part_is_never_recovered(log: AuditLog) -> None:
    filled(log, 3)
    _edit(log.path, log.home)
    before = log.path.read_bytes()
    with pytest.raises(AuditChainError) as caught:
        AuditLog(log.path).append("validate", mode="dev", data={})
    assert caught.value.line == 5
    assert log.path.read_bytes() == before


def test_a_process_notices_tampering_after_its_first_append(log: AuditLog) -> None:
    """Later appends are incremental, but a changed size or last line is still caught."""
    filled(log)
    content = lines(log.path)
    del content[1]
    log.path.write_text("".join(content))
    with pytest.raises(AuditChainError):
        log.append("validate", mode="dev", data={})

    fresh = AuditLog(log.path.with_name("other.log"))
    filled(fresh, 3)
    content = lines(fresh.path)
    content[-1] = content[-1].replace('"event":"checkpoint"', '"event":"checkpoinT"')  # same size
    assert len(content[-1]) == len(lines(fresh.path)[-1])
    fresh.path.write_text("".join(content))
    with pytest.raises(AuditChainError, match="line 6"):
        fresh.append("validate", mode="dev", data={})


def test_a_new_process_reads_the_whole_log_only_when_it_changed_since_the_last_append(
    log: AuditLog, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A process's first append does not check a long log again when the file is the very one
    the home recorded after the last append (device, inode, mtime, ctime): a governed call
    costs what it appends, not the log's history. An edit in place of the same size, its
    times put back, still changes the ctime (no process can set it) and is refused."""
    import snodo.state.audit as audit

    filled(log, 40)
    scans: list[int] = []
    real_scan = audit.scan_lines
    monkeypatch.setattr(audit, "scan_lines", lambda *a, **k: scans.append(1) or real_scan(*a, **k))
    audit._CHECKED.clear()  # what a new process starts with
    log.append("validate", mode="dev", data={"i": "next"})
    assert scans == [] and log.verify().ok
    scans.clear()

    before = os.stat(log.path)
    text = log.path.read_text(encoding="utf-8")
    edited = text.replace('"i":1,', '"i":7,', 1)
    assert edited != text and len(edited) == len(text)
    log.path.write_text(edited, encoding="utf-8")
    os.utime(log.path, ns=(before.st_atime_ns, before.st_mtime_ns))
    audit._CHECKED.clear()
    with pytest.raises(AuditChainError, match="line 3"):
        log.append("validate", mode="dev", data={})
    assert scans == [1]


def test_the_process_that_wrote_last_appends_again_without_reading_the_log_or_the_home(
    log: AuditLog, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Every governed call appends: while the log and the home's two slots are exactly the
    files this process's last append left, the next append reads neither again. Any other
    write to either (here the home's record corrupted) is read, and refused, as before."""
    import snodo.state.audit as audit

    filled(log, 2)
    reads: list[Path] = []
    real_read = audit.read_anchor
    monkeypatch.setattr(audit, "read_anchor", lambda path: reads.append(path) or real_read(path))
    for i in range(3):
        with log.batch():
            log.append("validate", mode="dev", data={"i": i})
    assert reads == [] and log.verify().ok
    for slot in slots(log.anchor_path):
        slot.write_text("{")
    with pytest.raises(AuditChainError, match="home"):
        log.append("validate", mode="dev", data={})
    assert reads


def test_a_corrupt_home_checkpoint_is_reported(log: AuditLog) -> None:
    filled(log, 2)
    for slot in slots(log.anchor_path):
        slot.write_text("{")
    report = log.verify()
    assert not report.ok and "checkpoint recorded in the home" in report.reason
    with pytest.raises(AuditChainError, match="home"):
        log.append("validate", mode="dev", data={})


# ------------------------------------------------------------------ export, offline check


def test_export_verifies_offline_with_the_public_key_alone(
    log: AuditLog, snodo_cli: Callable[..., Any], tmp_path: Path
) -> None:
    filled(log, 5)
    project = log.path.parent.parent.parent
    (project / ".snodo" / "protocol.yml").write_text("protocol_id: x\n")
    out = tmp_path / "export"
    exported = snodo_cli("audit", "export", str(out), "--json", cwd=project)
    assert exported.returncode == 0, exported
    data = exported.json()
    assert Path(data["log"]).read_bytes() == log.path.read_bytes()
    assert Path(data["key"]).read_text().startswith("ssh-ed25519 ")

    # A third party: another home that never saw this project or this key.
    stranger = {"SNODO_HOME": str(tmp_path / "stranger-home")}
    ok = snodo_cli("audit", "verify", "--json", "--key", data["key"], data["log"], cwd=tmp_path, env=stranger)
    assert ok.returncode == 0 and ok.json()["count"] == 5, ok
    no_key = snodo_cli("audit", "verify", "--json", data["log"], cwd=tmp_path, env=stranger)
    assert no_key.returncode == 4 and "--key" in no_key.json()["hint"], no_key  # --json: errors as JSON

    _recompute_after_edit(Path(data["log"]), tmp_path)
    bad = snodo_cli("audit", "verify", "--json", "--key", data["key"], data["log"], cwd=tmp_path, env=stranger)
    assert bad.returncode == 1 and bad.json()["line"] == 10 and "signature" in bad.json()["reason"], bad

    other_key = tmp_path / "other.pub"
    other_key.write_bytes(
        Ed25519PrivateKey.generate()
        .public_key()
        .public_bytes(serialization.Encoding.OpenSSH, serialization.PublicFormat.OpenSSH)
    )
    wrong = snodo_cli("audit", "verify", "--json", "--key", str(other_key), str(log.path), cwd=tmp_path)
    assert wrong.returncode == 1 and "not by the trusted audit key" in wrong.json()["reason"], wrong


def test_verify_cannot_run_without_the_file_or_key(snodo_cli: Callable[..., Any], tmp_path: Path) -> None:
    missing = snodo_cli("audit", "verify", "--json", str(tmp_path / "nope.log"), cwd=tmp_path)
    assert missing.returncode == 4 and "no audit log" in missing.json()["error"], missing
    (tmp_path / "a.log").write_text("")
    no_key = snodo_cli(
        "audit", "verify", "--json", "--key", str(tmp_path / "k.pub"), str(tmp_path / "a.log"), cwd=tmp_path
    )
    assert no_key.returncode == 4 and "no public key" in no_key.json()["error"], no_key


def test_lines_are_canonical_and_any_equivalent_spelling_still_verifies(log: AuditLog) -> None:
    """Lines are written as canonical JSON (checked fast, on their bytes); the chain rule is
    about content, so a line re-spelt with the same content still verifies (the slow path)."""
    filled(log, 3)
    for line in lines(log.path):
        assert line == json.dumps(json.loads(line), sort_keys=True, separators=(",", ":"), ensure_ascii=False) + "\n"
    content = lines(log.path)
    content[2] = json.dumps(json.loads(content[2]), indent=None, ensure_ascii=True) + "\n"  # spaces, \\u escapes
    log.path.write_text("".join(content))
    report = log.verify()
    assert report.ok and report.count == 3
