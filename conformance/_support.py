"""What the contracts stand on: scratch repositories, snapshots, bounded calls, and the
kit's own oracle of which paths are governance state.

The oracle is written here, independently of snodo's path guard (zarr's lesson: a kit that
checks an implementation with that implementation's own helpers proves nothing). It is
deliberately simple and strict: it resolves a path the way the operating system would and
looks at the names the result passes through.
"""

from __future__ import annotations

import contextvars
import hashlib
import json
import os
import subprocess
import threading
import time
import unicodedata
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any, Generic, TypeVar

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
    if not base.exists():
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
