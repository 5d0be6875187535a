"""A pytest started ahead of the tests it will run, confined exactly as they will be (#26).

A governed run judges its work by running the project's tests after the coder; importing
pytest and its own plugins is a fixed ~0.2 s of every such run, spent while nothing else
happens. So that process starts early, from what the last test run in the same working
copy used (its command, set-up and sandbox policy, kept in ``$SNODO_HOME/cache/warm-tests``;
no environment value is stored): ``snodo run`` starts it as soon as the project's repository
is pinned (:func:`prestart_for`), before the plugins, the protocol and the engine load, and
the engine (:func:`prestart`) keeps it once the working copy is restored, or starts one
then. It imports pytest and its built-in plugins from the interpreter's own environment and
nothing of the workspace (it starts without the workspace's import roots in
``PYTHONPATH``, and takes the working directory off ``sys.path`` first), so what the tree
holds at that moment (before the restore, the last run's leftovers) never runs in it; then
it waits on its stdin. The test run that follows (:func:`snodo.workspace.testrun.run_suite`)
takes it (:func:`take`) only when it is exactly what a fresh start would be:

* the same interpreter running ``-m pytest`` in the same workspace;
* the same environment, variable for variable, but those read only once pytest runs
  (:data:`SENT_AT_GO`: the import roots, pytest's options, the probe's settings), which
  are sent with the go;
* the same sandbox policy, and the same bubblewrap mounts computed now from the tree as
  it is now (a path the run made since that a protected pattern matches is a new mount:
  no match, no use), each still on the file it was made on (a path replaced since is no
  longer covered inside: ``bwrap.mounted_identity``); bubblewrap only — Landlock's rules
  are fixed when a process starts;
* the process still waiting (a pytest that did not import is no start at all);
* nothing it imported ahead is one a fresh start would find in the workspace instead: at
  the go it lists the working directory and the import roots, which a fresh start searches
  before the environment, and a module there named as one it already imported (a
  ``pytest.py``, a project's own ``logging`` package, an extension module), or a
  ``sitecustomize``/``usercustomize`` that a fresh start would run, makes it step aside;
  so does a directory of that name when what it imported is a namespace package (the
  directory would join it). A file that is no module (``logging.conf``) or a directory
  without ``__init__`` beside a regular module (``html/`` of templates) does not.

Anything else discards it and the tests start the usual way; so does a process that
reports, before running anything, that it could not begin (:data:`NOT_STARTED`). The first
run of a project starts nothing ahead. Unused, it is killed when the run ends. Once pytest
has returned and the exit handlers have run, it ends at once (``os._exit``) rather than
tearing the interpreter down (pytest's collections and module teardown, 40-70 ms here),
unless a thread that a fresh start would wait for is still running or an output stream
cannot be flushed (the usual exit then does what it always does).
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import threading
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from attrs import evolve

from snodo.cachefiles import read_entry, write_entry
from snodo.proc import ProcessResult, Started, start_process
from snodo.sandbox import choose_backend
from snodo.sandbox.bwrap import mounted_identity, options, replaced_since
from snodo.sandbox.policy import Limits, SandboxPolicy, configured_home
from snodo.workspace.testrun import REPORT_ENV, suite_env

#: ``SNODO_WARM_TESTS=off``: nothing is started ahead (every test run starts the usual way).
SWITCH_ENV = "SNODO_WARM_TESTS"
#: Exit status (and first output line) of a prestarted pytest that could not begin.
NOT_STARTED = 121
MARKER = "snodo-warm-tests: not started"
#: The test run's variables nothing reads before pytest runs: the process started ahead
#: starts without them and gets them with the go (``PYTHONPATH`` also onto ``sys.path``,
#: where a fresh start's interpreter put it).
SENT_AT_GO = frozenset(
    {
        "PYTHONPATH",
        "PYTEST_ADDOPTS",
        "SNODO_PROJECT_MODULES",
        "SNODO_IMPORT_WORKSPACE",
        "SNODO_IMPORT_PROJECT_ROOT",
        REPORT_ENV,
    }
)
#: What the prestarted interpreter runs (``python -c``): standard library until the go,
#: then pytest exactly as ``python -m pytest ARGS`` runs it.
BOOT = f"""\
import os, sys
_first = bool(sys.path) and sys.path[0] in ("", os.getcwd())
if _first:
    del sys.path[0]
import importlib.machinery, json, runpy
try:
    import pytest, _pytest.config
    for _name in _pytest.config.default_plugins:
        if _name != "cacheprovider":
            __import__("_pytest." + _name)
except BaseException:
    print({MARKER!r}, flush=True)
    raise SystemExit({NOT_STARTED})
_line = sys.stdin.buffer.readline()
try:
    _go = json.loads(_line)
    _args = [str(a) for a in _go["args"]]
    _env = {{str(k): str(v) for k, v in _go["env"].items()}}
    _roots = _env["PYTHONPATH"].split(os.pathsep) if _env.get("PYTHONPATH") else []
    if "" in _roots:
        raise SystemExit("an empty PYTHONPATH entry")
    _roots = [os.path.abspath(p) for p in _roots]
    _front = ([os.getcwd()] if _first else []) + _roots
    _taken = {{n.partition(".")[0] for n in sys.modules}} - set(sys.builtin_module_names) - {{"__main__"}}
    _taken |= {{"sitecustomize", "usercustomize"}}
    _suffixes = tuple(importlib.machinery.all_suffixes())
    for _dir in _front:
        if not os.path.lexists(_dir):
            continue
        for _entry in os.listdir(_dir):
            _stem = _entry.partition(".")[0]
            if _stem not in _taken:
                continue
            if _entry != _stem:
                if any(_entry == _stem + _s for _s in _suffixes):
                    raise SystemExit(_entry)
                continue
            _full = os.path.join(_dir, _entry)
            if not os.path.isdir(_full):
                continue
            if getattr(sys.modules.get(_stem), "__file__", None) is None:
                raise SystemExit(_entry)
            if any(os.path.lexists(os.path.join(_full, "__init__" + _s)) for _s in _suffixes):
                raise SystemExit(_entry)
    os.environ.update(_env)
    _null = os.open(os.devnull, os.O_RDONLY)
    os.dup2(_null, 0)
    os.close(_null)
except BaseException:
    print({MARKER!r}, flush=True)
    raise SystemExit({NOT_STARTED})
_path = []
for _entry in _roots + sys.path:  # as site's removeduppaths leaves a fresh start's path
    if _entry not in _path:
        _path.append(_entry)
sys.path[:] = ([os.getcwd()] if _first else []) + _path
sys.argv = ["-m", *_args]
try:
    runpy.run_module("pytest", run_name="__main__", alter_sys=True)
    _code = 0
except SystemExit as _exit:
    _code = 0 if _exit.code is None else _exit.code
    if not isinstance(_code, int) or not 0 <= _code <= 255:
        raise
import atexit, threading
if any(_t.is_alive() and not _t.daemon for _t in threading.enumerate() if _t is not threading.main_thread()):
    raise SystemExit(_code)
atexit._run_exitfuncs()
try:
    sys.stdout.flush()
    sys.stderr.flush()
except BaseException:  # a stream that cannot be flushed: the usual exit reports it (status 120)
    raise SystemExit(_code)
os._exit(_code)
"""

_LOCK = threading.Lock()
_WAITING: dict[str, _Warm] = {}


class _Warm:
    def __init__(
        self,
        started: Started,
        python: str,
        env: dict[str, str],
        policy: SandboxPolicy,
        mounts: tuple[str, ...],
        mounted: tuple[tuple[str, int, int], ...],
    ) -> None:
        self.started, self.python, self.env, self.policy = started, python, env, policy
        self.mounts, self.mounted = mounts, mounted  # the bubblewrap mounts, and what they were made on


def _cache_dir() -> Path:
    return configured_home() / "cache" / "warm-tests"


def _key(workspace: Path) -> str:
    return hashlib.sha256(f"warm-tests\0{workspace}".encode()).hexdigest()


def _project_key(root: Path) -> str:
    return hashlib.sha256(f"warm-tests-project\0{root}".encode()).hexdigest()


def _off() -> bool:
    return os.environ.get(SWITCH_ENV, "").strip().lower() in {"off", "0", "no", "false"}


def eligible(argv: Sequence[str], python: str) -> bool:
    """Whether ``argv`` is ``python -m pytest ...`` run by ``python``."""
    return len(argv) >= 3 and argv[0] == python and argv[1] == "-m" and argv[2] == "pytest"


def policy_record(policy: SandboxPolicy) -> dict[str, Any]:
    """``policy`` as JSON, every field that takes part in its equality (the callbacks do not)."""
    return {
        "workspace": str(policy.workspace),
        "read_only": list(policy.read_only),
        "network": policy.network,
        "hidden": [str(p) for p in policy.hidden],
        "writable": [str(p) for p in policy.writable],
        "env": list(policy.env),
        "limits": [policy.limits.file_size, policy.limits.processes, policy.limits.memory],
        "interpreters": [str(p) for p in policy.interpreters],
        "mode": policy.mode,
    }


def policy_from(record: Mapping[str, Any]) -> SandboxPolicy:
    """The policy :func:`policy_record` kept (a record that does not make one raises)."""
    file_size, processes, memory = (int(v) for v in record["limits"])
    mode = record["mode"]
    if mode not in ("auto", "off"):
        raise ValueError(f"not a sandbox mode: {mode!r}")
    return SandboxPolicy(
        workspace=Path(record["workspace"]),
        read_only=tuple(str(v) for v in record["read_only"]),
        network=bool(record["network"]),
        hidden=tuple(Path(v) for v in record["hidden"]),
        writable=tuple(Path(v) for v in record["writable"]),
        env=tuple(str(v) for v in record["env"]),
        limits=Limits(file_size=file_size, processes=processes, memory=memory),
        interpreters=tuple(Path(v) for v in record["interpreters"]),
        mode=mode,
    )


def remember(workspace: Path, argv: Sequence[str], setup: Mapping[str, Any], policy: SandboxPolicy | None) -> None:
    """Keep how the tests ran in ``workspace`` (the command, ``setup``'s fields the
    environment is made from, the sandbox policy) for the next run's :func:`prestart`, and,
    for a run's working copy, that it was the project's last (for :func:`prestart_for`);
    each written only when it changed. Nothing is kept for a run that was not confined."""
    if policy is None:
        return
    text = json.dumps({"argv": list(argv), "setup": dict(setup), "policy": policy_record(policy)}, sort_keys=True)
    key = _key(workspace)
    if read_entry(_cache_dir(), key) != text:
        write_entry(_cache_dir(), key, text)
    root = os.path.realpath(str(setup.get("project_root") or workspace))
    where = os.path.realpath(workspace)
    if root != where:  # a run's working copy (tests run in the checkout itself, by MCP, start nothing early)
        pointer = json.dumps({"workspace": where})
        if read_entry(_cache_dir(), _project_key(Path(root))) != pointer:
            write_entry(_cache_dir(), _project_key(Path(root)), pointer)


def _spawn_env(env: Mapping[str, str]) -> dict[str, str]:
    """What the process started ahead starts with: the test run's environment without :data:`SENT_AT_GO`."""
    return {k: v for k, v in env.items() if k not in SENT_AT_GO}


def _go_env(env: Mapping[str, str]) -> dict[str, str] | None:
    """What the go sends: the test run's :data:`SENT_AT_GO` variables, or ``None`` when one
    of them is exactly what snodo's own environment holds (a confined start would then not
    pass it on, see ``sandbox.environ``; not worth copying: start the usual way)."""
    sent = {k: v for k, v in env.items() if k in SENT_AT_GO}
    return None if any(os.environ.get(k) == v for k, v in sent.items()) else sent


def _mounts(policy: SandboxPolicy, python: str, env: Mapping[str, str]) -> tuple[str, ...] | None:
    """The bubblewrap mounts a start of ``python`` under ``policy`` would get now, or
    ``None`` where bubblewrap does not confine."""
    if policy.mode == "off" or choose_backend().name != "bwrap":
        return None
    return options(policy, python, env, ())


def _record(workspace: str) -> tuple[list[str], dict[str, Any], SandboxPolicy] | None:
    raw = read_entry(_cache_dir(), _key(Path(workspace)))
    try:
        record = json.loads(raw) if raw else None
        argv, setup = [str(a) for a in record["argv"]], dict(record["setup"])  # type: ignore[index]
        policy = policy_from(record["policy"])  # type: ignore[index]
    except Exception:  # an older record, or one that does not read: nothing to start
        return None
    if not eligible(argv, str(setup.get("python"))) or str(setup.get("workspace")) != workspace:
        return None
    if os.path.realpath(policy.workspace) != workspace:
        return None
    return argv, setup, policy


def _fits(warm: _Warm, policy: SandboxPolicy, env: Mapping[str, str]) -> bool:
    """Whether ``warm`` is confined as a start under ``policy`` in ``env`` would be now."""
    return (
        policy == warm.policy
        and warm.started.running()
        and _spawn_env(env) == warm.env
        and _mounts(policy, warm.python, warm.env) == warm.mounts
        and not replaced_since(warm.mounted, warm.mounts)
    )


def _start(where: str, setup: Mapping[str, Any], policy: SandboxPolicy) -> bool:
    """Start the pytest of ``setup`` in ``where`` confined by ``policy``, waiting for its go."""
    try:
        python = str(setup["python"])
        env = _spawn_env(suite_env(setup, ""))
        mounts = _mounts(policy, python, env)
        if mounts is None:
            return False
        mounted = mounted_identity(mounts)  # before bubblewrap mounts them
        started = start_process([python, "-c", BOOT], cwd=Path(where), env=env, sandbox=policy)
    except Exception:  # a record or a start that does not work is no start: the tests start as usual
        return False
    _wait(where, _Warm(started, python, env, policy, mounts, mounted))
    return True


def _wait(where: str, warm: _Warm) -> None:
    """``warm`` is the one waiting: a run has one working copy, so anything else waiting is
    not for it and is killed."""
    with _LOCK:
        gone = list(_WAITING.values())
        _WAITING.clear()
        _WAITING[where] = warm
    for old in gone:
        old.started.discard()


def prestart_for(root: Path) -> bool:
    """Start, for the project at ``root``, the pytest its last test run used, in the working
    copy and under the policy that run had: before anything of this run is known (the
    engine's :func:`prestart` keeps it only if they are this run's too). False (nothing
    started) without a record, where bubblewrap does not confine, or on any failure.

    Called from the thread that lives as long as the run (the main one): bubblewrap's
    ``--die-with-parent`` ends the sandbox when the *thread* that started it ends."""
    if _off():
        return False
    try:
        raw = read_entry(_cache_dir(), _project_key(Path(os.path.realpath(root))))
        where = str(json.loads(raw)["workspace"]) if raw else ""
        found = _record(where) if where else None
    except Exception:  # a pointer that does not read: nothing to start
        return False
    if found is None:
        return False
    _argv, setup, policy = found
    return _start(where, setup, policy)


def prestart(workspace: Path, policy: SandboxPolicy) -> bool:
    """Have the pytest the last test run in ``workspace`` used waiting, confined by
    ``policy``, in the environment the run will give it: the one :func:`prestart_for`
    started if it still is exactly that, else a new one. False (nothing waiting) without
    a record, where bubblewrap does not confine, or on any failure."""
    if _off():
        return False
    where = os.path.realpath(workspace)
    with _LOCK:
        early = _WAITING.pop(where, None)
    found = _record(where)
    if early is not None and found is not None:
        try:
            kept = _fits(early, policy, suite_env(found[1], ""))
        except Exception:  # a comparison that cannot be made is no match
            kept = False
        if kept:
            early.policy = policy
            if policy.on_confined is not None:  # what a start under this run's policy reports
                policy.on_confined("bwrap")
            _wait(where, early)
            return True
    if early is not None:
        early.started.discard()
    if found is None:
        return False
    return _start(where, found[1], policy)


def take(argv: Sequence[str], cwd: Path, env: Mapping[str, str], policy: SandboxPolicy | None) -> Started | None:
    """The pytest started ahead for exactly this run (see the module docstring), or ``None``."""
    with _LOCK:
        warm = _WAITING.pop(os.path.realpath(cwd), None)
    if warm is None:
        return None
    try:
        fits = (
            policy is not None and eligible(argv, warm.python) and _go_env(env) is not None and _fits(warm, policy, env)
        )
    except Exception:  # a comparison that cannot be made is no match (the tests start as usual)
        fits = False
    if not fits:
        warm.started.discard()
        return None
    return warm.started


def finish(started: Started, argv: Sequence[str], env: Mapping[str, str], timeout: float) -> ProcessResult | None:
    """Give the prestarted pytest its arguments and the variables read once it runs, and
    wait for it; ``None`` when it could not begin (run the tests the usual way)."""
    go = json.dumps({"args": list(argv[3:]), "env": _go_env(env) or {}}) + "\n"
    result = started.finish(go, timeout=timeout)
    if result.returncode == NOT_STARTED and result.output.startswith(MARKER):
        return None
    return evolve(result, argv=tuple(argv))  # reported as the command the tests asked for


def discard(workspace: Path | None = None) -> None:
    """Kill what was started ahead for ``workspace`` (every workspace: ``None``) and not used."""
    with _LOCK:
        if workspace is None:
            gone = list(_WAITING.values())
            _WAITING.clear()
        else:
            gone = [w for w in (_WAITING.pop(os.path.realpath(workspace), None),) if w is not None]
    for warm in gone:
        with contextlib.suppress(Exception):  # called as a run ends: a kill that fails must not end it
            warm.started.discard()
