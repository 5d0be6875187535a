"""What the contracts stand on: scratch repositories, snapshots, bounded calls, and the
kit's own oracle of which paths are governance state.

The oracle is written here, independently of snodo's path guard (zarr's lesson: a kit that
checks an implementation with that implementation's own helpers proves nothing). It is
deliberately simple and strict: it resolves a path the way the operating system would and
looks at the names the result passes through.
"""

from __future__ import annotations

import contextlib
import contextvars
import hashlib
import json
import os
import subprocess
import sys
import threading
import time
import unicodedata
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any, Generic, TypeVar

import pytest
from attrs import frozen

T = TypeVar("T")

#: The directories no coder output may land in, whatever the plugin or the protocol says.
GOVERNANCE_DIRS = (".snodo", ".git")
#: The protected path the kit's scratch protocol declares; the filter must honour it too.
PROTECTED_DIR = "secrets"

PROTOCOL_YML = """\
protocol_id: conformance-scratch
name: Scratch project of the snodo conformance kit
version: "1.0.0"
protected_paths:
  - secrets
modes:
  - mode_id: dev
    name: Development
    tools: [read, edit, test]
    validators: [tests]
    coder: mock
validators:
  - validator_id: tests
    validator_type: pytest
"""

STATE_JSON = '{"current_mode": "dev", "sessions": []}\n'


# ----------------------------------------------------------------------- the oracle


def _key(name: str) -> str:
    """The name a case- or Unicode-folding file system would see."""
    folded = unicodedata.normalize("NFKC", name).casefold()
    return folded.split(":", 1)[0].rstrip(" .")


def forbidden_reason(root: Path, path: str, protected: tuple[str, ...] = (PROTECTED_DIR,)) -> str | None:
    """Why ``path`` must never be written by a coder in ``root``, or None if it may be.

    Absolute paths, paths escaping the root (through ``..`` or a symlink), and anything that
    passes through ``.snodo``/``.git`` (spelled or resolved, any case) or a protected
    directory are forbidden.
    """
    if not isinstance(path, str) or not path.strip():
        return "the path is empty"
    if os.path.isabs(path) or "\\" in path or (len(path) > 1 and path[0].isalpha() and path[1] == ":"):
        return "absolute or non-POSIX path"
    base = Path(os.path.realpath(root))
    resolved = Path(os.path.realpath(base / path))
    if resolved != base and base not in resolved.parents:
        return "escapes the project root"
    inside = resolved.relative_to(base).parts
    names = [_key(p) for p in (*path.split("/"), *inside) if p not in ("", ".", "..")]
    for name in names:
        if name in GOVERNANCE_DIRS:
            return f"passes through {name}/"
    if inside and _key(inside[0]) in {_key(p) for p in protected}:
        return f"under the protected path {inside[0]}/"
    return None


# --------------------------------------------------------------------- scratch repos


def git(cwd: Path, *args: str) -> str:
    """Run git with a fixed identity and none of the user's hooks or signing in the way."""
    cmd = [
        "git",
        "-c", "user.name=snodo conformance",
        "-c", "user.email=conformance@snodo.invalid",
        "-c", "commit.gpgsign=false",
        "-c", "core.hooksPath=/dev/null",
        "-c", "init.defaultBranch=main",
        *args,
    ]  # fmt: skip
    try:
        proc = subprocess.run(cmd, cwd=cwd, capture_output=True, text=True, timeout=60, check=False)
    except FileNotFoundError:
        raise RuntimeError("the snodo conformance kit needs git on PATH to build scratch repositories") from None
    if proc.returncode != 0:
        raise RuntimeError(f"git {' '.join(args)} failed in {cwd}: {proc.stderr.strip()}")
    return proc.stdout


def make_repo(root: Path, files: Mapping[str, str]) -> Path:
    """A committed git repository with ``.snodo/`` state and ``files``, like a governed project."""
    root.mkdir(parents=True, exist_ok=True)
    everything = {".snodo/protocol.yml": PROTOCOL_YML, ".snodo/state.json": STATE_JSON, **files}
    for rel, content in everything.items():
        target = root / rel
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(content, encoding="utf-8")
    git(root, "init", "-q")
    git(root, "add", "-A")
    git(root, "commit", "-q", "-m", "scratch project of the snodo conformance kit")
    return root


def snapshot(root: Path, *, only: str | None = None) -> dict[str, str]:
    """Every entry under ``root`` (or under ``root/only``) with a hash of what it holds."""
    base = root / only if only else root
    state: dict[str, str] = {}
    if not base.exists() and not base.is_symlink():
        return state
    if not base.is_dir() or base.is_symlink():  # a single file (``.git/config``) or link
        rel = base.relative_to(root).as_posix()
        if base.is_symlink():
            state[rel] = "link:" + os.readlink(base)
        else:
            try:
                state[rel] = hashlib.sha256(base.read_bytes()).hexdigest()
            except OSError as exc:
                state[rel] = f"unreadable: {exc}"
        return state
    for dirpath, dirnames, filenames in os.walk(base):
        for name in dirnames:
            full = Path(dirpath, name)
            state[full.relative_to(root).as_posix() + "/"] = "link:" + os.readlink(full) if full.is_symlink() else "dir"
        for name in filenames:
            full = Path(dirpath, name)
            rel = full.relative_to(root).as_posix()
            if full.is_symlink():
                state[rel] = "link:" + os.readlink(full)
                continue
            try:
                state[rel] = hashlib.sha256(full.read_bytes()).hexdigest()
            except OSError as exc:
                state[rel] = f"unreadable: {exc}"
    return state


def differences(before: Mapping[str, str], after: Mapping[str, str]) -> list[str]:
    """Human-readable changes between two snapshots, sorted."""
    out = []
    for path in sorted(set(before) | set(after)):
        if path not in after:
            out.append(f"removed {path}")
        elif path not in before:
            out.append(f"created {path}")
        elif before[path] != after[path]:
            out.append(f"modified {path}")
    return out


def head_and_refs(root: Path) -> str:
    """Where HEAD points and every ref: what a commit of one's own changes."""
    return git(root, "rev-parse", "HEAD") + git(root, "for-each-ref", "--format=%(refname) %(objectname)")


# --------------------------------------------------------------------- bounded calls


@frozen
class Outcome(Generic[T]):
    """How a bounded call ended: ``value`` or ``error``, or neither when it ``hung``."""

    value: T | None
    error: BaseException | None
    hung: bool
    seconds: float

    def describe(self) -> str:
        if self.hung:
            return f"still running after {self.seconds:.1f}s"
        if self.error is not None:
            return f"raised {type(self.error).__name__}: {self.error}"
        return f"returned {type(self.value).__name__} after {self.seconds:.1f}s"


def bounded(fn: Callable[[], T], seconds: float) -> Outcome[T]:
    """Call ``fn`` in a daemon thread and wait at most ``seconds``; a hang is reported, not waited out."""
    box: dict[str, Any] = {}

    def work() -> None:
        try:
            box["value"] = fn()
        except BaseException as exc:  # everything the plugin raises is data for the contract
            box["error"] = exc

    started = time.monotonic()
    # a copy of this context: the plugin runs under the sandbox policy the kit set, if any
    ctx = contextvars.copy_context()
    thread = threading.Thread(target=ctx.run, args=(work,), name="snodo-conformance-call", daemon=True)
    thread.start()
    thread.join(seconds)
    took = time.monotonic() - started
    if thread.is_alive():
        return Outcome(None, None, True, took)
    return Outcome(box.get("value"), box.get("error"), False, took)


# ------------------------------------------------------------------ configuration


def load_config(raw: str | None, option: str) -> dict[str, Any]:
    """``--snodo-*-config``: inline JSON (starting with ``{``) or the path of a JSON file."""
    if raw is None:
        return {}
    text = raw.strip()
    source = "the inline JSON"
    if not text.startswith("{"):
        path = Path(text).expanduser()
        try:
            text = path.read_text(encoding="utf-8")
        except OSError as exc:
            raise ValueError(f"{option} {raw!r}: not inline JSON and not a readable file: {exc}") from None
        source = str(path)
    try:
        data = json.loads(text)
    except ValueError as exc:
        raise ValueError(f"{option}: {source} is not valid JSON: {exc}") from None
    if not isinstance(data, dict):
        raise ValueError(f"{option}: {source} must hold a JSON object, got {type(data).__name__}")
    return data


def json_problem(value: Any) -> str | None:
    """Why ``value`` cannot go into the audit log as JSON, or None."""
    try:
        json.dumps(value, allow_nan=False)
    except (TypeError, ValueError) as exc:
        return str(exc)
    return None


# ------------------------------------------------------------------ safety probes


def _stat(pid: int) -> tuple[int, str] | None:
    """``(parent pid, state)`` of a live process, from ``/proc`` (None when gone or unreadable)."""
    try:
        raw = Path(f"/proc/{pid}/stat").read_text(encoding="utf-8", errors="replace")
    except OSError:
        return None
    fields = raw[raw.rfind(")") + 2 :].split()
    return (int(fields[1]), fields[0]) if len(fields) > 1 else None


def _cmdline(pid: int) -> str:
    try:
        raw = Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return "?"
    return raw.replace(b"\0", b" ").decode("utf-8", "replace").strip()[:200] or "?"


_SUBREAPER_SET = False


def _become_subreaper() -> None:
    """Make this process adopt orphans (Linux): a child that daemonises stays countable."""
    global _SUBREAPER_SET
    if _SUBREAPER_SET:
        return
    _SUBREAPER_SET = True
    try:
        import ctypes  # noqa: PLC0415 ctypes only where prctl is called, once

        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(36, 1, 0, 0, 0)  # PR_SET_CHILD_SUBREAPER
    except (OSError, AttributeError):  # not Linux: direct descendants are still seen
        pass


def descendants() -> dict[int, str]:
    """Every live (non-zombie) descendant of this process: pid -> command line."""
    if not Path("/proc/self/stat").exists():
        return {}
    parent: dict[int, int] = {}
    for entry in os.scandir("/proc"):
        if entry.name.isdigit():
            info = _stat(int(entry.name))
            if info is not None and info[1] != "Z":
                parent[int(entry.name)] = info[0]
    me = os.getpid()
    found: dict[int, str] = {}
    for pid in parent:
        seen, cur = set(), pid
        while cur in parent and cur not in seen and cur != me:
            seen.add(cur)
            cur = parent[cur]
        if cur == me and pid != me:
            found[pid] = _cmdline(pid)
    return found


class ProcessWatch:
    """Which processes a plugin call left running: descendants after it returned, minus before."""

    def __init__(self) -> None:
        _become_subreaper()
        self.before = set(descendants())

    def leftovers(self, grace: float = 1.0) -> dict[int, str]:
        """What is still running ``grace`` seconds after the call returned (then killed)."""
        deadline = time.monotonic() + grace
        while True:
            left = {pid: cmd for pid, cmd in descendants().items() if pid not in self.before}
            if not left or time.monotonic() >= deadline:
                break
            time.sleep(0.05)
        for pid in left:
            with contextlib.suppress(OSError):
                os.kill(pid, 9)
        return left


_NETWORK_EVENTS = frozenset({"socket.connect", "socket.getaddrinfo", "socket.gethostbyname", "socket.sendto"})
_probe_lock = threading.Lock()
_probe_armed = 0
_probe_seen: list[str] = []
_probe_installed = False


def _audit(event: str, args: tuple[Any, ...]) -> None:
    if not _probe_armed or event not in _NETWORK_EVENTS:
        return
    if event in ("socket.connect", "socket.sendto"):
        address = args[-1] if args else None
        if isinstance(address, str | bytes):  # AF_UNIX: a local socket, not the network
            return
    try:
        shown = repr(args[1:] if event.startswith("socket.connect") else args)[:160]
    except Exception:  # repr of hostile objects
        shown = "?"
    with _probe_lock:
        if len(_probe_seen) < 20:
            _probe_seen.append(f"{event}{shown}")


class NetworkProbe:
    """Records network attempts made in this process (connect, name lookups) while armed.

    An audit hook (``sys.addaudithook``) cannot be removed, so one is installed once per
    process and only records between :meth:`__enter__` and :meth:`__exit__`.
    """

    def __enter__(self) -> NetworkProbe:
        global _probe_armed, _probe_installed

        with _probe_lock:
            if not _probe_installed:
                sys.addaudithook(_audit)
                _probe_installed = True
            _probe_seen.clear()
            _probe_armed += 1
        self.attempts: list[str] = []
        return self

    def __exit__(self, *exc: object) -> None:
        global _probe_armed
        with _probe_lock:
            _probe_armed -= 1
            self.attempts = list(_probe_seen)


# ------------------------------------------------------------- one error, not one per test

_BROKEN = pytest.StashKey[dict[str, str]]()


def once(request: pytest.FixtureRequest, key: str, build: Callable[[], T]) -> T:
    """Build a fixture value; when that fails, the first test shows the error and every later
    test needing the same value is skipped naming it (one error per broken registration)."""
    broken = request.config.stash.setdefault(_BROKEN, {})
    if key in broken:
        pytest.skip(f"{key}: not usable, see the error in {broken[key]}")
    try:
        return build()
    except (pytest.fail.Exception, NotImplementedError):
        broken[key] = request.node.name
        raise


# ------------------------------------------------------------------------- the report

TARGETS = pytest.StashKey[dict[tuple[str, str], Any]]()


def record_target(config: pytest.Config, kind: str, name: str, host: Any) -> None:
    """Remember a plugin under test (and its host) for the conformance report."""
    config.stash.setdefault(TARGETS, {})[(kind, name)] = host
