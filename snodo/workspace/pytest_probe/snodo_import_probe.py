"""snodo's import probe: a pytest plugin snodo loads into every test run it judges.

snodo puts this file's directory on ``PYTHONPATH`` and adds ``-p snodo_import_probe`` to
``PYTEST_ADDOPTS``; it runs inside the project's own interpreter, so it imports nothing but
the standard library and keeps to syntax older Pythons read. At the end of the session it
reports which of the project's own modules were imported from outside the workspace
(``SNODO_IMPORT_WORKSPACE``): those with a top-level name the workspace defines
(``SNODO_PROJECT_MODULES``), and any module loaded from the user's checkout
(``SNODO_IMPORT_PROJECT_ROOT``, when the workspace is elsewhere) other than the
interpreter's own environment; plus the ids of failed tests. The report goes to the file
``SNODO_IMPORT_REPORT`` (under the temporary directory) and to one marked line of the
output, so it reaches snodo whichever of the two survives. It writes nothing else.
"""

from __future__ import annotations

import json
import os
import sys
from typing import Any

MARKER = "snodo-import-report: "
_failed: list[str] = []
_report: dict[str, Any] | None = None


def _inside(path: str, root: str) -> bool:
    real = os.path.realpath(path)
    return real == root or real.startswith(root.rstrip(os.sep) + os.sep)


def _module_paths(module: Any) -> list[str]:
    path = getattr(module, "__file__", None)
    if isinstance(path, str) and path:
        return [path]
    return [p for p in list(getattr(module, "__path__", None) or []) if isinstance(p, str)]


def _build() -> dict[str, Any]:
    root = os.path.realpath(os.environ.get("SNODO_IMPORT_WORKSPACE", os.getcwd()))
    checkout = os.environ.get("SNODO_IMPORT_PROJECT_ROOT") or ""
    checkout = os.path.realpath(checkout) if checkout else ""
    names = {n for n in os.environ.get("SNODO_PROJECT_MODULES", "").split(",") if n}
    # The interpreter's own environment (a project's .venv lives inside its checkout).
    prefixes = {os.path.realpath(p) for p in (sys.prefix, sys.base_prefix, sys.exec_prefix)}
    checked = 0
    foreign: dict[str, str] = {}
    for name, module in sorted(sys.modules.items()):
        if module is None:
            continue
        paths = _module_paths(module)
        if not paths or any(_inside(p, root) for p in paths):
            if paths and name.split(".")[0] in names:
                checked += 1
            continue
        if name.split(".")[0] in names:
            checked += 1
            foreign[name] = os.path.realpath(paths[0])
        elif (
            checkout
            and any(_inside(p, checkout) for p in paths)
            and not any(_inside(p, prefix) for p in paths for prefix in prefixes)
        ):
            foreign[name] = os.path.realpath(paths[0])
    return {"workspace": root, "checked": checked, "foreign": foreign, "failed": _failed[:200]}


def pytest_runtest_logreport(report: Any) -> None:
    if report.failed and report.nodeid not in _failed:
        _failed.append(report.nodeid)


def pytest_collectreport(report: Any) -> None:
    if report.failed:
        _failed.append(report.nodeid or "<collection>")


def pytest_sessionfinish(session: Any, exitstatus: Any) -> None:
    global _report
    _report = _build()
    target = os.environ.get("SNODO_IMPORT_REPORT")
    if target:
        try:
            with open(target, "w", encoding="utf-8") as fh:
                json.dump(_report, fh)
        except OSError:
            pass  # the marked output line still carries the report


def pytest_terminal_summary(terminalreporter: Any) -> None:
    report = _report if _report is not None else _build()
    terminalreporter.write_line(MARKER + json.dumps(report, separators=(",", ":")))
