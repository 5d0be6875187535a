"""How fast a signed audit log verifies: `snodo audit verify` on a log of N signed events.

The log is written the way governed calls write it: batches of three events (`tool_call`,
`validate`, `token_issued`), each batch closed by a signed checkpoint, so N events make
N/3 checkpoints. Measures the verification in process (`AuditLog.verify`) and as the
command a person runs (`snodo audit verify`, interpreter start included).

Target (issue 12): at least 50,000 signed events per second.

    python benchmarks/audit_verify.py [--events 150000]
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any


def build(log_path: Path, events: int) -> None:
    """Write the log through the real AuditLog, minus the fsyncs (writing is not what is
    measured here, and N/3 fsyncs would take minutes)."""
    from snodo.state.audit import AuditLog

    saved = {name: getattr(os, name) for name in ("fsync", "fdatasync") if hasattr(os, name)}
    for name in saved:
        setattr(os, name, lambda fd: None)
    try:
        _build(AuditLog(log_path), events)
    finally:
        for name, real in saved.items():
            setattr(os, name, real)


def _build(log: Any, events: int) -> None:
    for i in range(0, events, 3):
        with log.batch():
            log.append("tool_call", mode="producer", data={"tool": "validate_task", "args_sha256": f"{i:064x}"})
            log.append(
                "validate",
                mode="producer",
                data={
                    "task_id": f"t-{i}",
                    "phase": "pre_execute",
                    "status": "pass",
                    "results": [{"validator_id": "scope", "severity": "pass", "justification": "ok"}],
                },
            )
            log.append("token_issued", mode="producer", data={"task_id": f"t-{i}", "jti": f"{i:032x}"})


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--events", type=int, default=150_000)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--smoke", action="store_true", help="one quick iteration (CI); fails on any error")
    args = parser.parse_args()
    if args.smoke:
        args.events, args.runs = 300, 1
    with tempfile.TemporaryDirectory() as tmp:
        os.environ["SNODO_HOME"] = str(Path(tmp) / "home")
        log_path = Path(tmp) / "audit.log"
        t = time.perf_counter()
        build(log_path, args.events)
        print(f"wrote {args.events} events in {time.perf_counter() - t:.1f}s ({log_path.stat().st_size / 1e6:.1f} MB)")

        from snodo.state.audit import AuditLog

        inproc = []
        for _ in range(args.runs):
            t = time.perf_counter()
            report = AuditLog(log_path).verify()
            inproc.append(time.perf_counter() - t)
            assert report.ok and report.count == args.events, report
        cli = []
        for _ in range(args.runs):
            t = time.perf_counter()
            subprocess.run(
                [sys.executable, "-m", "snodo", "audit", "verify", str(log_path)], check=True, capture_output=True
            )
            cli.append(time.perf_counter() - t)
        rate_in = args.events / statistics.median(inproc)
        rate_cli = args.events / statistics.median(cli)
        verdict = "met" if rate_cli >= 50_000 else "NOT met"
        print(f"AuditLog.verify      median {statistics.median(inproc):6.2f}s  {rate_in:9,.0f} events/s")
        print(
            f"snodo audit verify   median {statistics.median(cli):6.2f}s  {rate_cli:9,.0f} events/s  "
            f"(target >= 50,000: {verdict})"
        )


if __name__ == "__main__":
    main()
