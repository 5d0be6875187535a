"""What one judgement reuses from another: the base's results on disk, whole judgements in memory."""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import tempfile
import threading
import time
from collections import OrderedDict
from collections.abc import Callable
from concurrent.futures import Future
from pathlib import Path
from typing import Any, TypeVar, cast

from attrs import frozen

from snodo.base.convert import CONVERTER

from .record import Session
from .session import BOOT
from .tooling import Options

#: Bumped when what the judge records changes: older cached base results are not used.
JUDGE_VERSION = "4"
T = TypeVar("T")


@frozen(kw_only=True)
class BaseResult:
    session: Session
    roots: tuple[str, ...] = ("",)  # the import roots, relative to the copy ("": the copy itself)
    flaky: tuple[str, ...] = ()
    duration: float = 0.0
    cached: bool = False


def _interpreter_stamp(python: str) -> list[Any]:
    """The executable, its ``pyvenv.cfg`` and what is installed (``*.dist-info`` names the version)."""
    real = os.path.realpath(python)
    prefix = os.path.dirname(os.path.dirname(python))
    stamp: list[Any] = [python, real]
    for path in (real, os.path.join(prefix, "pyvenv.cfg")):
        with contextlib.suppress(OSError):
            st = os.stat(path)
            stamp.append([path, st.st_size, st.st_mtime_ns])
    with contextlib.suppress(OSError):
        for site in sorted((Path(prefix) / "lib").glob("python3*/site-packages")):
            stamp.append([str(site), sorted(os.listdir(site))])
    return stamp


def base_key(base_tree: str, python: str, opts: Options) -> str:
    """What the base's results depend on."""
    material = {
        "judge": JUDGE_VERSION,
        "boot": hashlib.sha256(BOOT.read_bytes()).hexdigest(),
        "tree": base_tree,
        "interpreter": _interpreter_stamp(python),
        "pythonpath": opts.pythonpath,
        # not require_all: it only changes how the results are read
        "options": {"options": opts.options, "paths": opts.paths, "plugins": opts.plugins},
    }
    return hashlib.sha256(json.dumps(material, sort_keys=True, default=str).encode()).hexdigest()


def load_base(cache: Path | None, key: str) -> BaseResult | None:
    if cache is None:
        return None
    try:
        data = json.loads((cache / "base" / f"{key}.json").read_text(encoding="utf-8"))
        return CONVERTER.structure({**data, "cached": True}, BaseResult)
    except Exception:
        return None


def store_base(cache: Path | None, key: str, result: BaseResult) -> None:
    """Written whole or not at all (not :mod:`snodo.state.atomic`: the plugin API must not import state)."""
    if cache is None:
        return
    path = cache / "base" / f"{key}.json"
    data = CONVERTER.unstructure(result)
    del data["cached"]
    path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    fd, temp = tempfile.mkstemp(dir=path.parent, prefix=".tmp-")
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as out:
            json.dump(data, out)
            out.flush()
            os.fsync(out.fileno())
        os.replace(temp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(temp)
        raise


class Shared:
    """Results by key: the first asker computes, later ones wait; a result lives :attr:`TTL` s, a failure not at all."""

    TTL = 600.0
    MAX_ENTRIES = 16

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._entries: OrderedDict[str, tuple[float, Future[Any]]] = OrderedDict()

    def get(self, key: str, compute: Callable[[], T]) -> T:
        with self._lock:
            now = time.monotonic()
            for k in [k for k, (at, f) in self._entries.items() if f.done() and now - at > self.TTL]:
                del self._entries[k]
            owner = key not in self._entries
            if owner:
                self._entries[key] = (now, Future())
                while len(self._entries) > self.MAX_ENTRIES:
                    self._entries.popitem(last=False)
            future = self._entries[key][1]
        if owner:
            try:
                future.set_result(compute())
            except BaseException as exc:
                future.set_exception(exc)
                with self._lock:
                    self._entries.pop(key, None)
                raise
        return cast(T, future.result())
