"""The task as told to a model-driven coder, shared so every coder hears the same rules.

The off-limits paths are stated up front: the engine refuses or halts on changes to them
anyway, and a coder that knows this wastes no attempt on them.
"""

from __future__ import annotations

from snodo.api import CoderRequest


def _bullets(items: tuple[str, ...]) -> str:
    return "\n".join(f"- {item.strip()}" for item in items if item.strip())


def off_limits(request: CoderRequest) -> tuple[str, ...]:
    """Paths the coder must not touch: governance state, git internals, protected paths."""
    return tuple(dict.fromkeys((".snodo/", ".git/", *request.protected_paths)))  # each named once


def task_prompt(request: CoderRequest) -> str:
    """Spec, criteria, guidance, last attempt's findings and the off-limits paths."""
    parts = [f"Task {request.task_id} (mode {request.mode_id}):\n{request.spec.strip()}"]
    if request.criteria:
        parts.append("Acceptance criteria (all must hold when you are done):\n" + _bullets(request.criteria))
    if request.guidance.strip():
        parts.append("Guidance:\n" + request.guidance.strip())
    if request.findings:
        parts.append(
            f"This is attempt {request.attempt + 1}. The validators rejected the previous attempt; "
            "address every finding:\n" + _bullets(request.findings)
        )
    parts.append(
        "Off limits: never create, modify or delete anything under "
        + ", ".join(off_limits(request))
        + ". `.snodo/` holds the governance state your work is judged by; changes there are "
        "refused and stop the run."
    )
    return "\n\n".join(parts)
