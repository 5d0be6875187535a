"""``patch``: a snodo coder that applies the unified diff found in the task spec.

Write the change you want as a fenced ```diff block in the spec; the coder turns it into
whole-file operations for the engine, which filters and writes them. It runs no program and
reaches no network, so it is deterministic and declares exactly that.

Settings (``coder_config``): ``strip`` — leading path components to remove from the file
names in the diff headers, like ``patch -p``; by default a git-style ``a/``/``b/`` prefix is
dropped.

Imports nothing from snodo but :mod:`snodo.api`, like every plugin should.
"""

from __future__ import annotations

import os
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

from snodo.api import (
    CoderCapabilities,
    CoderError,
    CoderRequest,
    CoderResult,
    CoderSpec,
    FileOperation,
    hookimpl,
)

from .diff import DiffError, apply_all, fenced_diffs, parse

SETTINGS = ("strip",)


def _read(workspace: Path, rel: str) -> str | None:
    """The current text of ``rel``, reading nothing outside the workspace."""
    root = Path(os.path.realpath(workspace))
    target = Path(os.path.realpath(root / rel))
    if root not in target.parents:
        raise CoderError(
            f"the diff patches {rel!r}, which is outside the project; the patch coder reads only inside it"
        )
    try:
        return target.read_text(encoding="utf-8")
    except FileNotFoundError:
        return None
    except (OSError, UnicodeDecodeError) as exc:
        raise CoderError(f"cannot read {rel!r} to patch it: {exc}") from None


class PatchCoder:
    """Factory target: checks ``coder_config`` before any task."""

    def __init__(self, config: Mapping[str, Any]) -> None:
        unknown = sorted(str(k) for k in config if k not in SETTINGS)
        if unknown:
            raise CoderError(
                f"coder 'patch': unknown coder_config key(s): {', '.join(unknown)}",
                hint=f"the patch coder honours: {', '.join(SETTINGS)}",
            )
        strip = config.get("strip")
        if strip is not None and (isinstance(strip, bool) or not isinstance(strip, int) or strip < 0):
            raise CoderError(f"coder 'patch': coder_config.strip must be a non-negative integer, got {strip!r}")
        self.strip: int | None = strip

    def generate(self, request: CoderRequest) -> CoderResult:
        text = fenced_diffs(request.spec)
        if not text.strip():
            raise CoderError(
                "the task spec has no ```diff block for the patch coder to apply",
                hint="put the change as a unified diff in a fenced ```diff block",
            )
        try:
            patches = parse(text, self.strip)
            changes = list(apply_all(patches, lambda rel: _read(request.workspace, rel)))
        except DiffError as exc:
            raise CoderError(f"the diff in the spec does not apply: {exc}") from None
        ops = tuple(
            FileOperation(op="delete", path=path)
            if content is None
            else FileOperation(op="write", path=path, content=content)
            for path, content in changes
        )
        request.log(f"patch: {len(ops)} operation(s) from the spec's diff")
        return CoderResult(operations=ops, summary=f"applied the spec's diff: {len(ops)} file operation(s)")


@hookimpl
def snodo_coders() -> Iterator[CoderSpec]:
    yield CoderSpec(
        name="patch",
        description="applies the unified diff found in a ```diff block of the task spec",
        capabilities=CoderCapabilities(
            writes_in_place=False,
            commits_own_changes=False,
            required_programs=(),
            settings=SETTINGS,
            needs_network=False,
            deterministic=True,
        ),
    )


@hookimpl
def snodo_generate(name: str, request: CoderRequest) -> CoderResult | None:
    return PatchCoder(request.config).generate(request) if name == "patch" else None


@hookimpl
def snodo_preflight(coder: str, coder_config: Mapping[str, Any]) -> None:
    """A bad ``strip`` is refused before the run spends anything."""
    if coder == "patch":
        PatchCoder(coder_config)
