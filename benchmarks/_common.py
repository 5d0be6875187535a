"""Shared helpers: run whole processes, measure wall time and peak RSS, print medians."""

from __future__ import annotations

import os
import statistics
import subprocess
import time
from collections.abc import Sequence
from pathlib import Path


def run_measured(argv: Sequence[str], *, cwd: Path, env: dict[str, str] | None = None) -> tuple[float, float, int]:
    """Run a process to completion; return (seconds, peak RSS in MiB, exit code)."""
    started = time.perf_counter()
    proc = subprocess.Popen(list(argv), cwd=cwd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    _pid, status, usage = os.wait4(proc.pid, 0)
    elapsed = time.perf_counter() - started
    proc.returncode = os.waitstatus_to_exitcode(status)
    return elapsed, usage.ru_maxrss / 1024, proc.returncode


def summary(name: str, samples: list[float], unit: str = "s") -> str:
    med = statistics.median(samples)
    spread = f"min {min(samples):8.3f}{unit}  max {max(samples):8.3f}{unit}"
    return f"{name:<34} median {med:8.3f}{unit}  {spread}  (n={len(samples)})"


def warm_pytest_rewrite_cache(python: str) -> None:
    """Let pytest write its assertion-rewrite cache once, as any machine without
    ``PYTHONDONTWRITEBYTECODE`` has it after the first test run.

    pytest rewrites the modules of every plugin distribution it loads (hypothesis's whole
    package among them: ~90 modules, about a second here) and caches the result beside
    them, unless bytecode writing is off. With it off on this machine, every pytest process
    (ours, the reference's and the by-hand one alike) would rewrite them again, inflating
    the by-hand floor as much as the governed run and flattering the ratio between them."""
    import tempfile

    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    with tempfile.TemporaryDirectory() as tmp:
        # any test will do: it is the run, loading every plugin, that writes the cache
        Path(tmp, "test_warm.py").write_text("def test_warm():\n    assert True\n")
        subprocess.run(
            [python, "-m", "pytest", "-q", "-p", "no:cacheprovider", tmp],
            cwd=tmp,
            env=env,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            check=False,
        )


def compile_bytecode() -> None:
    """Byte-compile snodo's own packages before measuring, as installing a wheel does.

    An editable checkout (CI's, a developer's) run with ``PYTHONDONTWRITEBYTECODE=1`` (set on
    some machines, this one included) has no bytecode for the modules changed since the last
    write, so every measured process would compile them from source again: tens of ms a
    process that no installed snodo pays, while the reference measured beside it was
    compiled by pip at install."""
    import compileall
    import importlib.util

    for name in ("snodo", "snodo_plugins", "snodo_conformance"):
        spec = importlib.util.find_spec(name)
        if spec is not None and spec.submodule_search_locations:
            for directory in spec.submodule_search_locations:
                compileall.compile_dir(directory, quiet=1)
