"""Start-up time of `snodo --help` and `snodo protocol check`, as whole processes.

Target (issue 2): `snodo --help` under 0.15 s on the reference machine. Compared with a
bare `python -c pass` so the ratio, not the noisy absolute number, tells the story.

    python benchmarks/startup.py [--runs 15]
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import compile_bytecode, run_measured, summary


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=int, default=15)
    parser.add_argument("--smoke", action="store_true", help="one quick iteration (CI); fails on any error")
    args = parser.parse_args()
    compile_bytecode()  # as an installed snodo has it (see _common.compile_bytecode)
    if args.smoke:
        args.runs = 1
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        env = {**os.environ, "SNODO_HOME": str(root / "home")}
        run_measured([sys.executable, "-m", "snodo", "init", "--dir", str(root)], cwd=root, env=env)
        cases = {
            "python -c pass": [sys.executable, "-c", "pass"],
            "snodo --help": [sys.executable, "-m", "snodo", "--help"],
            "snodo protocol check": [sys.executable, "-m", "snodo", "protocol", "check"],
        }
        medians = {}
        for name, argv in cases.items():
            measured = [run_measured(argv, cwd=root, env=env) for _ in range(args.runs)]
            failed = [code for _t, _rss, code in measured if code != 0]
            if failed:
                raise SystemExit(f"{name} exited {failed[0]}")
            samples = [seconds for seconds, _rss, _code in measured]
            print(summary(name, samples))
            medians[name] = sorted(samples)[len(samples) // 2]
        base = medians["python -c pass"]
        help_time = medians["snodo --help"]
        print(
            f"snodo --help: {help_time:.3f}s ({help_time / base:.1f}x bare python); target < 0.150s: "
            f"{'met' if help_time < 0.15 else 'NOT met'}"
        )


if __name__ == "__main__":
    main()
