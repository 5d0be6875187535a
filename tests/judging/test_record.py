"""The record reader trusts nothing it does not prove: written by the real recorder, then
tampered with the way code inside the test process could."""

from __future__ import annotations

import hashlib
import hmac
import json
import subprocess
import sys
from pathlib import Path

import pytest

from snodo.judging.record import Dishonest, read
from snodo.judging.session import BOOT

KEY = b"k" * 32


def _line(mac: bytes, event: dict) -> tuple[str, bytes]:
    body = json.dumps(event, sort_keys=True, separators=(",", ":"))
    new = hmac.new(KEY, mac + body.encode(), hashlib.sha256).hexdigest()
    return f"{new} {body}", new.encode()


def _record(events: list[dict]) -> str:
    mac, lines = b"", []
    for seq, event in enumerate(events):
        line, mac = _line(mac, {**event, "seq": seq})
        lines.append(line)
    return "\n".join(lines) + "\n"


def _honest(exit_status: int = 0, outcome: str = "passed") -> list[dict]:
    return [
        {"k": "start"},
        {"k": "collected", "ids": ["t.py::a"], "files": ["t.py"]},
        {"k": "phase", "nodeid": "t.py::a", "when": "setup", "outcome": "passed"},
        {"k": "phase", "nodeid": "t.py::a", "when": "call", "outcome": outcome},
        {"k": "phase", "nodeid": "t.py::a", "when": "teardown", "outcome": "passed"},
        {"k": "seal", "collected": 1, "phases": 3, "exitstatus": exit_status},
        {"k": "end", "exit": exit_status},
    ]


def test_an_honest_record_reads() -> None:
    assert read(_record(_honest()), KEY, 0).status == {"t.py::a": "passed"}
    assert read(_record(_honest(1, "failed")), KEY, 1).status == {"t.py::a": "failed"}


@pytest.mark.parametrize(
    ("name", "events", "exit_code"),
    [
        ("no end line", _honest()[:-1], 0),
        ("no seal", [*_honest()[:5], _honest()[6]], 0),
        ("exit status disagrees", _honest(1, "failed"), 0),
        ("killed", _honest(), None),
        (
            "a line after the end",
            [*_honest(), {"k": "phase", "nodeid": "t.py::a", "when": "call", "outcome": "passed"}],
            0,
        ),
        ("a phase twice", [*_honest()[:4], _honest()[3], *_honest()[4:]], 0),
        ("a test that was not collected", [*_honest()[:2], {**_honest()[2], "nodeid": "t.py::b"}, *_honest()[3:]], 0),
        ("a phase out of order", [_honest()[0], _honest()[1], _honest()[3], _honest()[2], *_honest()[4:]], 0),
        ("counts disagree with the seal", [*_honest()[:5], {**_honest()[5], "phases": 2}, _honest()[6]], 0),
        ("a report before the collection", [_honest()[0], _honest()[2], _honest()[1], *_honest()[3:]], 0),
    ],
)
def test_a_record_that_does_not_prove_itself_is_refused(name: str, events: list[dict], exit_code: int | None) -> None:
    with pytest.raises(Dishonest):
        read(_record(events), KEY, exit_code)


def test_a_line_from_a_second_writer_is_refused() -> None:
    text = _record(_honest())
    forged = text.replace('"outcome":"passed"', '"outcome":"failed"', 1)
    with pytest.raises(Dishonest, match="second writer"):
        read(forged, KEY, 0)
    with pytest.raises(Dishonest, match="second writer"):
        read(text, b"x" * 32, 0)


def test_the_real_recorder_writes_a_record_the_reader_accepts(tmp_path: Path) -> None:
    (tmp_path / "test_x.py").write_text("def test_a():\n    pass\n\ndef test_b():\n    assert False\n")
    record = tmp_path / "record"
    task = {
        "key": KEY.hex(),
        "record": str(record),
        "root": str(tmp_path),
        "path": [str(tmp_path)],
        "modules": [],
        "args": ["-p", "no:cacheprovider", "-q", "test_x.py"],
    }
    proc = subprocess.run(
        [sys.executable, "-I", "-B", str(BOOT)],
        input=json.dumps(task) + "\n",
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=60,
    )
    session = read(record.read_text(), KEY, proc.returncode)
    assert session.status == {"test_x.py::test_a": "passed", "test_x.py::test_b": "failed"}
    assert proc.returncode == 1  # read() refuses a record whose exit status is not the process's
