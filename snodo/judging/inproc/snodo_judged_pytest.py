"""snodo's judge inside the confined test process, as docs/judging.md ("How a change is
judged" 5–6) says; only the standard library before pytest, syntax older Pythons read."""

from __future__ import annotations

import functools
import hashlib
import hmac
import json
import os
import sys
import time
import traceback
from typing import Any

MAX_TEXT = 1200


class Record:
    def __init__(self, path: str, key: bytes) -> None:
        self._fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
        self._key = key
        self._mac = b""
        self._seq = 0

    def write(self, kind: str, **fields: Any) -> None:
        fields["k"] = kind
        fields["seq"] = self._seq
        body = json.dumps(fields, sort_keys=True, separators=(",", ":"))
        mac = hmac.new(self._key, self._mac + body.encode("utf-8"), hashlib.sha256).hexdigest()
        self._mac = mac.encode("ascii")
        self._seq += 1
        os.write(self._fd, (mac + " " + body + "\n").encode("utf-8"))


def _text(report: Any) -> str:
    longrepr = getattr(report, "longrepr", None)
    if longrepr is None:
        return ""
    try:
        text = str(longrepr)
    except Exception:  # a repr that cannot be shown is still a failure
        text = "<unprintable failure>"
    if len(text) > MAX_TEXT:
        text = text[: MAX_TEXT // 2] + "\n[...]\n" + text[-MAX_TEXT // 2 :]
    return text


#: The interpreter's own environment: trusted wherever it is (a project's .venv lies inside its checkout).
_ENVIRONMENT = [os.path.realpath(p) for p in (sys.prefix, sys.base_prefix, sys.exec_prefix)]


_real_dir = functools.lru_cache(maxsize=None)(os.path.realpath)


def _real(path: str) -> str:
    """``os.path.realpath(path)``, resolving each directory once (a session imports hundreds of modules)."""
    directory, name = os.path.split(path)
    joined = os.path.join(_real_dir(directory), name)
    return os.path.realpath(joined) if os.path.islink(joined) else joined


def _inside(path: str, root: str) -> bool:
    real = _real(path)
    return real == root or real.startswith(root.rstrip(os.sep) + os.sep)


def _judged(path: str, root: str) -> bool:
    return _inside(path, root) and not any(_inside(path, env) for env in _ENVIRONMENT)


def _no_bytecode_read(root: str) -> None:
    """Python and pytest never read bytecode cached in the judged tree (outside the interpreter's environment):
    a planted ``.pyc`` matching its source's mtime and size would run instead. Should either import fail, the
    record ends early: no verdict, never a pass without this defence."""
    import importlib._bootstrap_external as external  # noqa: PLC0415 CPython's import system, patched once

    from _pytest.assertion import rewrite  # noqa: PLC0415 after pytest, never from the copy

    cached = external.cache_from_source
    read_pyc: Any = getattr(rewrite, "_read_pyc", None)

    def cache_from_source(path: Any, debug_override: Any = None, *, optimization: Any = None) -> Any:
        if isinstance(path, (str, os.PathLike)) and _judged(os.fspath(path), root):
            raise NotImplementedError("snodo: no bytecode cache is read for the tree under judgement")
        return cached(path, debug_override, optimization=optimization)

    def _read_pyc(source: Any, pyc: Any, trace: Any = None) -> Any:
        if _judged(os.fspath(source), root):
            return None  # rewritten again from the source
        return read_pyc(source, pyc, trace) if trace is not None else read_pyc(source, pyc)

    external.cache_from_source = cache_from_source  # the global SourceLoader.get_code calls
    if read_pyc is not None:
        rewrite._read_pyc = _read_pyc


class Recorder:
    """The pytest plugin object (passed to ``pytest.main``, never found by name)."""

    def __init__(self, record: Record, root: str, modules: set[str], checkout: str) -> None:
        self.record = record
        self.root = root
        self.modules = modules
        self.checkout = checkout
        self.lines = 0
        self.collected = 0
        self.sealed = False

    def pytest_collection_finish(self, session: Any) -> None:
        items = session.items
        self.collected = len(items)
        config = session.config
        inipath = getattr(config, "inipath", None)
        self.record.write(
            "collected",
            ids=[item.nodeid for item in items],
            files=sorted({os.path.relpath(str(item.path), self.root) for item in items if hasattr(item, "path")}),
            conftests=sorted(
                os.path.relpath(str(getattr(p, "__file__", "")), self.root)
                for p in config.pluginmanager.get_plugins()
                if str(getattr(p, "__file__", "")).endswith("conftest.py")
            ),
            rootdir=os.path.relpath(str(config.rootpath), self.root),
            inifile=os.path.relpath(str(inipath), self.root) if inipath else None,
            python_files=list(config.getini("python_files") or []),
            config_names=_config_names(),
        )

    def pytest_deselected(self, items: Any) -> None:
        self.record.write("deselected", ids=[item.nodeid for item in items])

    def pytest_collectreport(self, report: Any) -> None:
        if report.failed:
            self.record.write("collect_error", nodeid=report.nodeid, text=_text(report))

    def pytest_runtest_logreport(self, report: Any) -> None:
        fields = {"nodeid": report.nodeid, "when": report.when, "outcome": report.outcome}
        if hasattr(report, "wasxfail"):
            fields["xfail"] = True
        if report.outcome != "passed":
            fields["text"] = _text(report)
        self.record.write("phase", **fields)
        self.lines += 1

    def pytest_sessionfinish(self, session: Any, exitstatus: Any) -> None:
        foreign, outside = _imports(self.root, self.modules, self.checkout)
        self.record.write(
            "seal",
            collected=self.collected,
            phases=self.lines,
            exitstatus=int(exitstatus),
            foreign=foreign,
            outside=outside,
        )
        self.sealed = True


def _config_names() -> list[str]:
    """The file names pytest's own ``locate_config`` looks for, read from pytest itself."""
    try:
        from _pytest.config import findpaths  # noqa: PLC0415 runs inside the test process, after pytest configured itself
    except Exception:
        return []
    names: set[str] = set()

    def walk(consts: Any) -> None:
        for c in consts:
            if isinstance(c, tuple):
                walk(c)
            elif isinstance(c, str) and c.endswith((".ini", ".toml", ".cfg")) and "/" not in c:
                names.add(c)

    for fn in (getattr(findpaths, "locate_config", None), getattr(findpaths, "determine_setup", None)):
        code = getattr(fn, "__code__", None)
        if code is not None:
            walk(code.co_consts)
    return sorted(names)


def _imports(root: str, modules: set[str], checkout: str) -> tuple[dict[str, str], list[str]]:
    """The project's modules (by top-level name, or from the checkout outside the interpreter's environment)
    imported from outside the judged copy; and the top-level names loaded from outside, which a new module shadows."""
    foreign: dict[str, str] = {}
    outside = set()
    for name, module in list(sys.modules.items()):
        path = getattr(module, "__file__", None)
        paths = [path] if isinstance(path, str) and path else list(getattr(module, "__path__", None) or [])
        paths = [p for p in paths if isinstance(p, str)]
        if not paths or any(_inside(p, root) for p in paths):
            continue
        if "." not in name and paths[0] == path:
            outside.add(name)
        own = name.split(".")[0] in modules
        if len(foreign) < 20 and (own or (checkout and any(_judged(p, checkout) for p in paths))):
            foreign[name] = _real(paths[0])
    return foreign, sorted(outside)[:2000]


def main() -> None:
    line = sys.stdin.readline()
    null = os.open(os.devnull, os.O_RDONLY)
    os.dup2(null, 0)
    os.close(null)
    task = json.loads(line)
    record = Record(task["record"], bytes.fromhex(task["key"]))
    del task["key"], line
    for name in [n for n in os.environ if n.startswith(("PYTEST_", "PYTHON"))]:
        del os.environ[name]
    os.environ["PYTEST_DISABLE_PLUGIN_AUTOLOAD"] = "1"
    sys.dont_write_bytecode = True
    record.write("start", python=sys.version.split()[0], pid=os.getpid(), at=time.time())
    try:
        import pytest  # noqa: PLC0415 from the interpreter's environment: the copy is not on sys.path yet
    except ImportError as exc:
        record.write("no_pytest", error=str(exc)[:500], python=sys.executable)
        os._exit(4)

    root = os.path.realpath(task["root"])
    _no_bytecode_read(root)
    for entry in reversed(task["path"]):
        sys.path.insert(0, entry)
    checkout = os.path.realpath(task["checkout"]) if task.get("checkout") else ""
    recorder = Recorder(record, root, set(task["modules"]), checkout)
    code = 4
    try:
        code = int(pytest.main(list(task["args"]), plugins=[recorder]))
    except BaseException:  # pytest's own crash: shown to a person (the record's end says it)
        traceback.print_exc()
    finally:
        record.write("end", exit=code, sealed=recorder.sealed)
        _flush()
        os._exit(code)


def _flush() -> None:
    for stream in (sys.stdout, sys.stderr):
        flush = getattr(stream, "flush", None)
        if flush is not None and not getattr(stream, "closed", False):
            flush()


if __name__ == "__main__":
    main()
