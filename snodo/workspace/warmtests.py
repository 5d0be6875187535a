"""A pytest started ahead of the tests it will run, confined exactly as they will be (#26).

A governed run judges its work by running the project's tests after the coder; importing
pytest and its own plugins is a fixed ~0.2 s of every such run, spent while nothing else
happens. The engine can start that process as soon as the working copy is ready
(:func:`prestart`): it imports pytest and its built-in plugins, from the interpreter's own
environment and nothing of the workspace (the working directory is taken off ``sys.path``
first), then waits on its stdin. The test run that follows (:func:`snodo.workspace.testrun.run_suite`)
takes it (:func:`take`) only when it is exactly what a fresh start would be:

* the same interpreter running ``-m pytest`` in the same workspace;
* the same environment, variable for variable, but the probe's report path (sent on);
* the same sandbox policy, and the same bubblewrap mounts computed now from the tree as
  it is now (a path the run made since that a protected pattern matches is a new mount:
  no match, no use), each still on the file it was made on (a path replaced since is no
  longer covered inside: ``bwrap.mounted_identity``); bubblewrap only — Landlock's rules
  are fixed when a process starts;
* the process still waiting (a pytest that did not import is no start at all).

Anything else discards it and the tests start the usual way; so does a process that
reports, before running anything, that it could not begin (:data:`NOT_STARTED`). What to
start is learned from the last test run in the same workspace (its command and set-up,
kept in ``$SNODO_HOME/cache/warm-tests``; no environment value is stored), so the first
run of a project starts nothing ahead. Unused, it is killed when the run ends.
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
from snodo.sandbox.policy import SandboxPolicy, configured_home
from snodo.workspace.testrun import REPORT_ENV, suite_env

#: ``SNODO_WARM_TESTS=off``: nothing is started ahead (every test run starts the usual way).
SWITCH_ENV = "SNODO_WARM_TESTS"
#: Exit status (and first output line) of a prestarted pytest that could not begin.
NOT_STARTED = 121
MARKER = "snodo-warm-tests: not started"
#: What the prestarted interpreter runs (``python -c``): standard library until the go,
#: then pytest exactly as ``python -m pytest ARGS`` runs it.
BOOT = f"""\
import os, sys
_first = bool(sys.path) and sys.path[0] in ("", os.getcwd())
if _first:
    del sys.path[0]
import json, runpy
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
    os.environ.update({{str(k): str(v) for k, v in _go["env"].items()}})
    _null = os.open(os.devnull, os.O_RDONLY)
    os.dup2(_null, 0)
    os.close(_null)
except BaseException:
    print({MARKER!r}, flush=True)
    raise SystemExit({NOT_STARTED})
if _first:
    sys.path.insert(0, os.getcwd())
sys.argv = ["-m", *_args]
runpy.run_module("pytest", run_name="__main__", alter_sys=True)
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


def eligible(argv: Sequence[str], python: str) -> bool:
    """Whether ``argv`` is ``python -m pytest ...`` run by ``python``."""
    return len(argv) >= 3 and argv[0] == python and argv[1] == "-m" and argv[2] == "pytest"


def remember(workspace: Path, argv: Sequence[str], setup: Mapping[str, Any]) -> None:
    """Keep how the tests ran in ``workspace`` (the command and ``setup``'s fields the
    environment is made from) for the next run's :func:`prestart`; written only when it
    changed."""
    text = json.dumps({"argv": list(argv), "setup": dict(setup)}, sort_keys=True)
    key = _key(workspace)
    if read_entry(_cache_dir(), key) != text:
        write_entry(_cache_dir(), key, text)


def _mounts(policy: SandboxPolicy, python: str, env: Mapping[str, str]) -> tuple[str, ...] | None:
    """The bubblewrap mounts a start of ``python`` under ``policy`` would get now, or
    ``None`` where bubblewrap does not confine."""
    if policy.mode == "off" or choose_backend().name != "bwrap":
        return None
    return options(policy, python, env, ())


def prestart(workspace: Path, policy: SandboxPolicy) -> bool:
    """Start the pytest the last test run in ``workspace`` used, confined by ``policy``, in
    the environment the run will give it. False (nothing started) without a record, where
    bubblewrap does not confine, or on any failure."""
    if os.environ.get(SWITCH_ENV, "").strip().lower() in {"off", "0", "no", "false"}:
        return False
    where = os.path.realpath(workspace)
    raw = read_entry(_cache_dir(), _key(Path(where)))
    try:
        record = json.loads(raw) if raw else None
        argv, setup = record["argv"], record["setup"]  # type: ignore[index]
        python = str(setup["python"])
        if not eligible(argv, python) or str(setup["workspace"]) != where:
            return False
        env = suite_env(setup, "")
        mounts = _mounts(policy, python, env)
        if mounts is None:
            return False
        mounted = mounted_identity(mounts)  # before bubblewrap mounts them
        started = start_process([python, "-c", BOOT], cwd=Path(where), env=env, sandbox=policy)
    except Exception:  # a record or a start that does not work is no start: the tests start as usual
        return False
    warm = _Warm(started, python, env, policy, mounts, mounted)
    with _LOCK:
        old = _WAITING.pop(where, None)
        _WAITING[where] = warm
    if old is not None:
        old.started.discard()
    return True


def take(argv: Sequence[str], cwd: Path, env: Mapping[str, str], policy: SandboxPolicy | None) -> Started | None:
    """The pytest started ahead for exactly this run (see the module docstring), or ``None``."""
    with _LOCK:
        warm = _WAITING.pop(os.path.realpath(cwd), None)
    if warm is None:
        return None
    same_env = {**env, REPORT_ENV: ""} == {**warm.env, REPORT_ENV: ""}  # the report path is sent with the go
    try:
        fits = (
            policy is not None
            and policy == warm.policy
            and eligible(argv, warm.python)
            and same_env
            and warm.started.running()
            and _mounts(policy, warm.python, env) == warm.mounts
            and not replaced_since(warm.mounted, warm.mounts)
        )
    except Exception:  # a comparison that cannot be made is no match (the tests start as usual)
        fits = False
    if not fits:
        warm.started.discard()
        return None
    return warm.started


def finish(started: Started, argv: Sequence[str], env: Mapping[str, str], timeout: float) -> ProcessResult | None:
    """Give the prestarted pytest its arguments and wait for it; ``None`` when it could
    not begin (run the tests the usual way)."""
    go = json.dumps({"args": list(argv[3:]), "env": {REPORT_ENV: env.get(REPORT_ENV, "")}}) + "\n"
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
