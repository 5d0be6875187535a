"""snodo's import probe: a pytest plugin loaded into every test run snodo judges, inside the
project's interpreter (so: standard library only, syntax older Pythons read).

It reports the project's own modules imported from outside the workspace (a top-level name
in ``SNODO_PROJECT_MODULES``, or anything from ``SNODO_IMPORT_PROJECT_ROOT`` but the
interpreter's environment), and is snodo's structured reading of the run: counts, failed
ids, pytest's exit status, each error's exception. The report goes to the file
``SNODO_IMPORT_REPORT`` and to one marked output line, whichever survives.
"""

from __future__ import annotations

import json
import os
import sys
import time
from typing import Any

MARKER = "snodo-import-report: "
_failed: list[str] = []
_counts: dict[str, int] = {}
_errors: list[dict[str, Any]] = []
_exit: dict[str, Any] = {}
_report: dict[str, Any] | None = None
MAX_ERRORS = 20
ERROR_CHARS = 1500


_REAL_DIRS: dict[str, str] = {}
#: The interpreter's own environment: trusted wherever it is (a project's .venv lies inside its checkout).
_ENVIRONMENT = {os.path.realpath(p) for p in (sys.prefix, sys.base_prefix, sys.exec_prefix)}


def _real(path: str) -> str:
    """``os.path.realpath(path)``, resolving each directory once: a session holds hundreds
    of modules from a few dozen directories, and ``realpath`` costs a ``lstat`` per component."""
    directory, name = os.path.split(path)
    real_dir = _REAL_DIRS.get(directory)
    if real_dir is None:
        real_dir = _REAL_DIRS[directory] = os.path.realpath(directory)
    joined = os.path.join(real_dir, name)
    return os.path.realpath(joined) if os.path.islink(joined) else joined


def _inside(path: str, root: str) -> bool:
    real = _real(path)
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
    checked = 0
    foreign: dict[str, str] = {}
    for name, module in sorted(sys.modules.items()):
        paths = _module_paths(module)
        own = name.split(".")[0] in names
        checked += bool(paths) and own
        if paths and not any(_inside(p, root) for p in paths) and (own or _from_checkout(paths, checkout)):
            foreign[name] = _real(paths[0])
    return {
        "workspace": root,
        "checked": checked,
        "foreign": foreign,
        "failed": _failed[:200],
        "counts": dict(_counts),
        "errors": _errors[:MAX_ERRORS],
        **_exit,
    }


def _from_checkout(paths: list[str], checkout: str) -> bool:
    inside = any(_inside(p, checkout) for p in paths) if checkout else False
    return inside and not any(_inside(p, prefix) for p in paths for prefix in _ENVIRONMENT)


def _no_workspace_bytecode(root: str) -> None:
    """Python and pytest never read bytecode cached inside the workspace (outside the
    interpreter's environment): an agent can plant a ``.pyc`` whose recorded mtime and size
    match its source, and it would run instead of the source the verdict is about. For such
    a source ``cache_from_source`` raises ``NotImplementedError`` (what CPython does with
    caching off) and pytest's assertion rewriter reads no cached rewrite."""
    try:
        import importlib._bootstrap_external as external  # noqa: PLC0415 runs inside the test process, once pytest configured itself
    except ImportError:  # not CPython's import system: nothing of this kind to distrust
        return
    cached = external.cache_from_source

    def judged(path: str) -> bool:
        return _inside(path, root) and not any(_inside(path, env) for env in _ENVIRONMENT)

    def cache_from_source(path: Any, debug_override: Any = None, *, optimization: Any = None) -> Any:
        if isinstance(path, (str, os.PathLike)) and judged(os.fspath(path)):
            raise NotImplementedError("snodo: no bytecode cache is read for the workspace under judgement")
        return cached(path, debug_override, optimization=optimization)

    external.cache_from_source = cache_from_source  # the global SourceLoader.get_code calls
    try:
        from _pytest.assertion import rewrite  # noqa: PLC0415 runs inside the test process, once pytest configured itself
    except ImportError:
        return
    read_pyc = getattr(rewrite, "_read_pyc", None)
    if read_pyc is None:
        return

    def _read_pyc(source: Any, pyc: Any, trace: Any = None) -> Any:
        if judged(os.fspath(source)):
            return None  # rewritten again from the source
        return read_pyc(source, pyc, trace) if trace is not None else read_pyc(source, pyc)

    rewrite._read_pyc = _read_pyc


_no_workspace_bytecode(os.path.realpath(os.environ.get("SNODO_IMPORT_WORKSPACE", os.getcwd())))


def _count(outcome: str) -> None:
    _counts[outcome] = _counts.get(outcome, 0) + 1


def pytest_runtest_logreport(report: Any) -> None:
    xfail = hasattr(report, "wasxfail")
    if report.failed:
        _count("failed" if report.when == "call" else "errors")
        if report.nodeid not in _failed:
            _failed.append(report.nodeid)
    elif report.skipped:
        _count("xfailed" if xfail else "skipped")
    elif report.when == "call":
        _count("xpassed" if xfail else "passed")


def pytest_collectreport(report: Any) -> None:
    if report.failed:
        _count("errors")
        _failed.append(report.nodeid or "<collection>")


def pytest_deselected(items: Any) -> None:
    _counts["deselected"] = _counts.get("deselected", 0) + len(items)


def _cause(exc: Any) -> Any:
    """The exception that made pytest give up: an ``ImportError`` in the chain when there is one."""
    seen = 0
    node = exc
    while node is not None and seen < 10:
        if isinstance(node, ImportError):
            return node
        node, seen = node.__cause__ or node.__context__, seen + 1
    return exc


def pytest_exception_interact(node: Any, call: Any, report: Any) -> None:
    """Every error pytest reports (collection and tests), with the exception object itself."""
    if len(_errors) >= MAX_ERRORS or call.excinfo is None:
        return
    exc = _cause(call.excinfo.value)
    text = str(getattr(report, "longreprtext", "") or "")
    missing = getattr(exc, "name", None) if isinstance(exc, ImportError) else None
    _errors.append(
        {
            "nodeid": getattr(report, "nodeid", "") or "<collection>",
            "when": getattr(report, "when", None) or "collect",
            "type": type(exc).__name__,
            "message": str(exc)[:500],
            "missing": missing if isinstance(missing, str) else None,
            "text": text[-ERROR_CHARS:],
        }
    )


def pytest_sessionstart(session: Any) -> None:
    _exit["started"] = time.monotonic()


def pytest_sessionfinish(session: Any, exitstatus: Any) -> None:
    global _report
    _exit["duration"] = round(time.monotonic() - _exit.pop("started", time.monotonic()), 2)
    status = int(exitstatus)
    try:
        import pytest  # noqa: PLC0415 runs inside the test process, once pytest configured itself

        name = pytest.ExitCode(status).name
    except (ImportError, AttributeError, ValueError):
        name = None
    _exit["exitstatus"] = status
    _exit["exitstatus_name"] = name
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
