"""Reading a workspace without ever leaving it or changing it.

Paths that plugins read come from models, specs and diffs, and may point anywhere
(``../``, absolute, through a symlink), so every read resolves the path first and refuses
what lands outside the project root. Nothing here writes: validators must leave the tree
exactly as they found it.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

#: Directories that are not the project's own work: VCS and governance internals, tool caches
#: and environments. Walking them would be slow and would judge code nobody wrote here.
SKIP_DIRS = frozenset(
    {
        ".git",
        ".snodo",
        ".hg",
        ".svn",
        "__pycache__",
        ".venv",
        "venv",
        "node_modules",
        ".tox",
        ".nox",
        ".mypy_cache",
        ".pytest_cache",
        ".ruff_cache",
    }
)

TRUNCATED = "\n[... truncated]"


def inside(root: Path, rel: str) -> Path | None:
    """The real path ``rel`` names under ``root``, or None when it resolves outside the root."""
    base = root.resolve()
    target = (base / rel).resolve()
    if target != base and base not in target.parents:
        return None
    return target


def read_text(root: Path, rel: str, limit: int = 50_000) -> str | None:
    """At most ``limit`` bytes of a text file as a string; None if missing, outside or binary."""
    path = inside(root, rel)
    if path is None or not path.is_file():
        return None
    with path.open("rb") as fh:
        data = fh.read(limit + 1)
    if b"\0" in data:
        return None
    text = data[:limit].decode("utf-8", errors="replace")
    return text + TRUNCATED if len(data) > limit else text


def walk(root: Path) -> Iterator[str]:
    """The project's files as sorted root-relative POSIX paths, symlinked dirs not followed."""
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames[:] = sorted(d for d in dirnames if d not in SKIP_DIRS)
        for name in sorted(filenames):
            yield Path(dirpath, name).relative_to(root).as_posix()


def changed_contents(root: Path, changed: tuple[str, ...], budget: int = 60_000, per_file: int = 20_000) -> str:
    """The changed files as labelled blocks for a model prompt, bounded in total size."""
    blocks: list[str] = []
    left = budget
    for i, rel in enumerate(changed):
        if left <= 0:
            blocks.append(f"[{len(changed) - i} more changed file(s) not shown]")
            break
        text = read_text(root, rel, min(per_file, left))
        if text is None:
            blocks.append(f"--- {rel} (deleted, binary or outside the project)")
            continue
        blocks.append(f"--- {rel}\n{text}")
        left -= len(text)
    return "\n\n".join(blocks) or "(no files changed)"
