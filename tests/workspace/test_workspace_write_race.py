"""A process swapping a directory for a symlink while the tool surface writes through it.

The guard checks a path and the write follows; between the two, another process (an agent's
test run, say) can replace ``pkg/`` with a symlink to ``.snodo/`` or out of the root. Writes
go through directory descriptors opened with ``O_NOFOLLOW`` one component at a time, so the
swap makes the write fail; it never lands where the guard would have refused it.
"""

from __future__ import annotations

import itertools
import os
import select
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from snodo.base.errors import PathValidationError, ToolError
from snodo.workspace import PathGuard, Workspace

TRIES = 400
#: How long the writes go on for a swap to be seen (it usually is within the first TRIES).
RACE_SECONDS = 90.0
#: Writes that met the swapped symlink before the race may end early.
SEEN = 5

# Swap `pkg` for a symlink and back, as fast as it can, until the stop file appears.
RACER = r"""
import os, sys, time
root, target, stop = sys.argv[1], sys.argv[2], sys.argv[3]
os.chdir(root)
n = 0
while not os.path.exists(stop):
    try:
        os.rename("pkg", "pkg.real")
        os.symlink(target, "pkg")
        time.sleep(0.0005)
        os.unlink("pkg")
        os.rename("pkg.real", "pkg")
        n += 1
        if n == 1:
            print("swapping", flush=True)
        time.sleep(0.0005)
    except OSError:
        pass
print(n)
"""


@contextmanager
def racing(root: Path, target: str) -> Iterator[Callable[[], int]]:
    stop = root.parent / "stop"
    proc = subprocess.Popen(
        [sys.executable, "-c", RACER, str(root), target, str(stop)], stdout=subprocess.PIPE, text=True
    )
    swaps: list[int] = []
    try:
        assert proc.stdout is not None
        # the writes start once it swaps (a loaded machine can take seconds to start it)
        ready, _, _ = select.select([proc.stdout], [], [], 60)
        assert ready and proc.stdout.readline().strip() == "swapping", "the racing process did not start"
        yield lambda: swaps[0]
    finally:
        stop.touch()
        out, _ = proc.communicate(timeout=30)
        swaps.append(int(out.split()[-1]) if out.split() else 0)
        if os.path.islink(root / "pkg"):
            os.unlink(root / "pkg")
        if not (root / "pkg").exists() and (root / "pkg.real").exists():
            os.rename(root / "pkg.real", root / "pkg")


def tree(base: Path) -> dict[str, bytes]:
    found: dict[str, bytes] = {}
    for directory, _dirs, files in os.walk(base):
        for name in files:
            path = Path(directory) / name
            found[path.relative_to(base).as_posix()] = path.read_bytes()
    return found


@pytest.fixture
def racy_project(tmp_path: Path) -> Path:
    root = tmp_path / "project"
    (root / ".snodo").mkdir(parents=True)
    (root / ".snodo" / "protocol.yml").write_text("protocol_id: p\n")
    (root / ".snodo" / "victim.txt").write_text("keep me\n")
    (root / "pkg").mkdir()
    (root / "pkg" / "victim.txt").write_text("agent's own\n")
    (tmp_path / "outside").mkdir()
    (tmp_path / "outside" / "victim.txt").write_text("keep me\n")
    return root


def attempt(call: Callable[[], object]) -> str:
    try:
        call()
    except PathValidationError:
        return "refused"
    except ToolError:
        return "failed"
    return "done"


@pytest.mark.slow
@pytest.mark.parametrize("target", [".snodo", "../outside"])
def test_writes_never_follow_a_swapped_symlink(racy_project: Path, target: str) -> None:
    root = racy_project
    governed = (root / target).resolve()
    before = tree(governed)
    ws = Workspace(root, PathGuard(root, ("secrets",)))
    results: dict[str, int] = {}
    with racing(root, target) as swaps:
        # TRIES rounds, and on until writes met the swapped symlink SEEN times (a slow disk
        # makes every write long and the window rare; a loaded machine starves the racer),
        # for at most RACE_SECONDS: the assertions below say which.
        deadline = time.monotonic() + RACE_SECONDS
        for i in itertools.count():
            seen = results.get("refused", 0) + results.get("failed", 0)
            if i >= TRIES and (seen >= SEEN or time.monotonic() > deadline):
                break
            for outcome in (
                attempt(lambda i=i: ws.write_file(f"pkg/new{i}.txt", "agent\n")),
                attempt(lambda: ws.write_file("pkg/victim.txt", "agent\n")),
                attempt(lambda i=i: ws.write_file(f"pkg/sub{i}/deep.txt", "agent\n")),
                attempt(lambda i=i: ws.create_directory(f"pkg/dir{i}")),
                attempt(lambda: ws.delete_file("pkg/victim.txt")),
            ):
                results[outcome] = results.get(outcome, 0) + 1
    # The race was real when writes met the swapped state (below); how many swaps the racer
    # made depends on how the machine schedules it (CI's load once left it fewer than 20).
    assert swaps() > 0, "the racing process never swapped; the test proved nothing"
    # Nothing reached the directory the symlink pointed at: no new file, none changed or deleted.
    assert tree(governed) == before
    assert sorted(p.name for p in governed.iterdir()) == sorted(before)
    # ... while the race was real: writes went through, and the swap was seen.
    assert results.get("done", 0) > 0, results
    assert results.get("refused", 0) + results.get("failed", 0) > 0, results
    for name in os.listdir(root):
        assert name in (".snodo", "pkg", "pkg.real"), name
    leftovers = [p for p in tree(root) if p.endswith(".tmp")]
    assert not leftovers


@pytest.mark.slow
def test_reads_never_follow_a_swapped_symlink_out_of_the_root(racy_project: Path) -> None:
    root = racy_project
    (root.parent / "outside" / "victim.txt").write_text("SECRET\n")
    ws = Workspace(root, PathGuard(root))
    texts: dict[str, int] = {}
    with racing(root, "../outside") as swaps:
        for _ in range(TRIES * 3):
            try:
                text = ws.read_file("pkg/victim.txt")
            except PathValidationError:
                text = "refused"
            except ToolError:
                text = "failed"
            texts[text] = texts.get(text, 0) + 1
    assert swaps() > 20
    assert "SECRET\n" not in texts, texts
    assert texts.get("agent's own\n", 0) > 0, texts
