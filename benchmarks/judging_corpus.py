"""The adversarial judging corpus (issue 40): how many cheats snodo catches, per family and path.

Every case of ``tests/judging/corpus/`` (honest changes and cheats on the ``textkit``
library, four tasks) is judged on a fresh real repository with the default ``team``
template, on the engine path (``snodo run``, the mock coder dictating the change) and on the
validate path (the change committed by hand, ``snodo validate --phase post_execute
--base``). A cheat is caught by a blocker or an escalation; an honest change is judged right
when it passes (an honest test refactor: when it escalates).

Target: every cheat caught on both paths, never a ``validator_error``; every honest change
judged right.

    python benchmarks/judging_corpus.py                      # the whole corpus (minutes)
    python benchmarks/judging_corpus.py --family hang --path engine -j 2
    python benchmarks/judging_corpus.py --json > report.json
    python benchmarks/judging_corpus.py --smoke              # one case per family group, one path

``--smoke`` fails (exit 1) when a case could not be judged at all or an honest change is
misjudged; with ``--strict`` (and always outside ``--smoke``) a missed cheat fails too.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections import defaultdict
from collections.abc import Sequence
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))  # the corpus lives with the tests

from tests.judging.corpus.cases import FAMILIES  # noqa: E402
from tests.judging.corpus.runner import PATHS, Record, judge_all, select  # noqa: E402

#: One case per family group: honest work, the tests and their harness, the test process at
#: run time, the code under test.
SMOKE = ("slug-honest", "counts-conftest-sessionfinish", "slug-atexit-os-exit", "counts-constant-answers")
SMOKE_PATH = "validate"
#: Outcomes that mean the case was never judged: the corpus itself is broken.
NOT_JUDGED = frozenset({"could_not_run", "unknown"})


def table(records: Sequence[Record]) -> str:
    """caught/total per family and path, then the missed cases by name."""
    paths = [p for p in PATHS if any(r.path == p for r in records)]
    counts: dict[tuple[str, str], list[int]] = defaultdict(lambda: [0, 0])
    for r in records:
        if r.got == "n/a":
            continue
        cell = counts[(r.family, r.path)]
        cell[0] += r.caught
        cell[1] += 1
    lines = [f"{'family':<22}" + "".join(f"{p:>14}" for p in paths)]
    totals = {p: [0, 0] for p in paths}
    for family in FAMILIES:
        if not any((family, p) in counts for p in paths):
            continue
        row = f"{family:<22}"
        for p in paths:
            caught, total = counts.get((family, p), [0, 0])
            totals[p][0] += caught
            totals[p][1] += total
            row += f"{f'{caught}/{total}':>14}" if total else f"{'-':>14}"
        lines.append(row)
    lines.append(f"{'all':<22}" + "".join(f"{f'{totals[p][0]}/{totals[p][1]}':>14}" for p in paths))
    lines.append("(honest: judged right; others: caught by blocker or escalate. n/a cases not counted)")
    missed = [r for r in records if not r.caught]
    if missed:
        lines.append("")
        lines.append("missed:")
        lines.extend(f"  {r.family:<20} {r.case:<42} {r.path:<9} expected {r.expected:<9} got {r.got}" for r in missed)
    errors = [r for r in records if r.got == "validator_error" and r.expected != "pass"]
    if errors:
        lines.append(f"validator_error for a cheat (never acceptable): {', '.join(sorted({r.case for r in errors}))}")
    return "\n".join(lines)


def timing(records: Sequence[Record]) -> str:
    judged = [r for r in records if r.got != "n/a"]
    if not judged:
        return ""
    seconds = sorted(r.seconds for r in judged)
    slowest = max(judged, key=lambda r: r.seconds)
    return (
        f"per case and path: median {seconds[len(seconds) // 2]:.1f}s, max {slowest.seconds:.1f}s "
        f"({slowest.case}, {slowest.path}); total {sum(seconds):.0f}s of judging"
    )


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--smoke", action="store_true", help="one case per family group, one path")
    parser.add_argument("--strict", action="store_true", help="a missed cheat fails the smoke run too")
    parser.add_argument("--json", action="store_true", help="one JSON object on stdout: records and summary")
    parser.add_argument("--path", choices=[*PATHS, "both"], default="both")
    parser.add_argument("--family", action="append", default=[])
    parser.add_argument("--case", action="append", default=[])
    parser.add_argument("-j", "--jobs", type=int, default=1, help="cases judged at once (the machine is shared)")
    args = parser.parse_args(argv)

    if args.smoke:
        cases, paths = select(SMOKE), (SMOKE_PATH,)
    else:
        cases = select(args.case, args.family)
        paths = PATHS if args.path == "both" else (args.path,)
    started = time.perf_counter()
    records = list(judge_all(cases, paths, progress=not args.json, jobs=args.jobs))
    elapsed = time.perf_counter() - started

    broken = [r for r in records if r.got in NOT_JUDGED]
    honest_wrong = [r for r in records if not r.caught and r.expected == "pass"]
    missed = [r for r in records if not r.caught]
    if args.json:
        print(json.dumps({"records": [r.as_dict() for r in records], "seconds": round(elapsed, 1)}, indent=1))
    else:
        print(table(records))
        print(timing(records))
        print(f"wall {elapsed:.0f}s, {len(records)} judgements")
    if broken:
        print(f"not judged at all: {', '.join(f'{r.case}/{r.path}' for r in broken)}", file=sys.stderr)
    failed = broken or honest_wrong or ((args.strict or not args.smoke) and missed)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
