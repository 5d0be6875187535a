"""The README's main job: `snodo demo` runs the whole life cycle and exits 0."""

from __future__ import annotations

import time
from pathlib import Path


def test_demo_runs_to_completion(tmp_path: Path, snodo_cli) -> None:  # type: ignore[no-untyped-def]
    started = time.monotonic()
    r = snodo_cli("demo", "--dir", str(tmp_path / "demo"), cwd=tmp_path)
    assert r.returncode == 0, r
    assert time.monotonic() - started < 60
    for marker in (
        "status escalate",
        "recorded approve",
        "status pass",
        "refused write_file",
        "intact",
        "demo complete",
    ):
        assert marker in r.stdout, marker
    assert list((tmp_path / "demo").iterdir()) == []  # throwaway unless --keep; the named dir is kept
