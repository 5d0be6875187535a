"""Task identity: the id a spec text gets, and which ids a caller may choose (a plan derives it without governance)."""

from __future__ import annotations

import hashlib
import re

from snodo.base.errors import ToolError

_TASK_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,99}$")


def spec_sha256(spec: str) -> str:
    return hashlib.sha256(spec.encode("utf-8")).hexdigest()


def check_task_id(task_id: str) -> str:
    """Task ids end up in job records, audit lines and branch names: only plain ids pass."""
    if not _TASK_ID.match(task_id) or ".." in task_id or task_id.endswith(".lock"):
        raise ToolError(
            f"task_id {task_id!r} is refused: use letters, digits, '.', '_' and '-' (at most 100, "
            "starting with a letter or digit)"
        )
    return task_id


def derive_task_id(spec: str) -> str:
    """The same spec text is the same task, so a decision about it applies on re-validation."""
    return "task-" + spec_sha256(spec.strip())[:16]
