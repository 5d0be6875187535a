"""The ``--snodo-report`` JSON: each kit test's outcome and why, and the plugins under test.

The plugin module's hooks feed it (:mod:`snodo_conformance.plugin`); the report is built
from what pytest reported, never from the kit's own view of a test.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import pytest

import snodo

from ._support import TARGETS
from .contracts import CONTRACTS, SAFETY_CONTRACTS, bare

_RESULTS = pytest.StashKey[dict[str, dict[str, Any]]]()
_WHY_LIMIT = 2000


def note_outcome(config: pytest.Config, report: pytest.TestReport) -> None:
    """Keep a kit test's outcome and why; a failure or error in any phase outranks a pass."""
    results = config.stash.setdefault(_RESULTS, {})
    entry = results.setdefault(report.nodeid, {"outcome": "pass", "why": ""})
    if report.when == "call" or report.outcome != "passed":
        if report.outcome == "passed":
            outcome, why = (
                ("xpass", "listed as a known failure, yet it passed") if hasattr(report, "wasxfail") else ("pass", "")
            )
        elif report.outcome == "skipped":
            if hasattr(report, "wasxfail"):
                outcome, why = "xfail", str(report.wasxfail)
            else:
                outcome = "skip"
                longrepr = report.longrepr
                why = str(longrepr[2]) if isinstance(longrepr, tuple) else str(longrepr)
                why = why.removeprefix("Skipped: ")
        else:
            outcome = "fail" if report.when == "call" else "error"
            why = report.longreprtext
        if entry["outcome"] in ("pass", "xpass") or outcome in ("fail", "error"):
            entry.update(outcome=outcome, why=why.strip()[:_WHY_LIMIT])


def write_report(config: pytest.Config, path: Path, exitstatus: int, kinds: Iterable[str]) -> None:
    """Write the report; ``kinds`` are the plugin kinds that can be named on the command line."""

    targets = config.stash.get(TARGETS, {})
    plugins = []
    for (kind, name), host in sorted(targets.items()):
        owner = host.owner_of(kind, name)
        info = next((i for i in host.info() if i.name == owner), None)
        plugins.append(
            {
                "kind": kind,
                "name": name,
                "plugin": owner,
                "distribution": info.distribution if info else None,
                "version": info.version if info else None,
            }
        )
    if not plugins:  # nothing got as far as resolving: say what was asked for
        plugins = [
            {
                "kind": kind,
                "name": config.getoption(f"snodo_{kind}"),
                "plugin": None,
                "distribution": None,
                "version": None,
            }
            for kind in kinds
            if config.getoption(f"snodo_{kind}")
        ]
    contracts = []
    for nodeid, entry in config.stash.get(_RESULTS, {}).items():
        test = nodeid.rsplit("::", 1)[-1]
        name = bare(test)
        contracts.append(
            {
                "test": test,
                "class": nodeid.split("::")[1] if nodeid.count("::") >= 2 else "",
                "contract": CONTRACTS.get(name, ""),
                "safety": name in SAFETY_CONTRACTS,
                **entry,
            }
        )
    counts: dict[str, int] = {}
    for c in contracts:
        counts[c["outcome"]] = counts.get(c["outcome"], 0) + 1
    report = {
        "kit": "snodo-conformance",
        "kit_version": snodo.__version__,
        "plugins": plugins,
        "passed": exitstatus == 0 and not counts.get("fail") and not counts.get("error"),
        "counts": counts,
        "contracts": contracts,
    }
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(report, indent=2) + "\n", encoding="utf-8")
