"""The ``git-hooks`` validator: the project's own pre-commit hook judges the work, confined.

snodo's own git never runs hooks (a hook is a file in the work tree or a setting the
agent could have chosen, and snodo's git runs unconfined). A team whose hooks should
judge agent work says so with this validator: the hook ``tooling.hook`` names (default
``pre-commit``) is found where git would look — ``core.hooksPath`` (husky, pre-commit,
``.githooks``) relative to the top of the work tree, else the repository's ``hooks/``
directory — and run like any test command, through :func:`snodo.api.run_process`, so it
is confined by the sandbox of the validation. Exit 0 is a pass; anything else is a
blocker carrying the hook's output. A hook that does not exist or is not executable is a
fault (no verdict): the validator was asked for because hooks exist.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

from snodo.api import ValidationRequest, ValidatorFault, ValidatorSpec, Verdict, hookimpl, run_process

from . import _tooling

NAME = "git-hooks"
SETTINGS = ("hook", "timeout")
_OUTPUT_LINES = 60


@hookimpl
def snodo_validators() -> Iterator[ValidatorSpec]:
    yield ValidatorSpec(
        name=NAME,
        description="runs the project's git pre-commit hook (core.hooksPath or .git/hooks), confined",
        needs_model=False,
        deterministic=True,
        settings=SETTINGS,
    )


def _git(workspace: Path, *args: str) -> str:
    """One read-only git question, asked confined like the hook (it reads the agent's tree)."""
    result = run_process(["git", "--no-optional-locks", *args], cwd=workspace, timeout=30)
    return result.output.strip() if result.ok else ""


def find_hook(workspace: Path, name: str) -> Path | None:
    """Where git would look for hook ``name`` for ``workspace``; ``None`` outside a repository."""
    top = _git(workspace, "rev-parse", "--show-toplevel")
    if not top:
        return None
    hooks_path = _git(workspace, "config", "--get", "core.hooksPath")
    if hooks_path:
        base = Path(os.path.expanduser(hooks_path))
        return (base if base.is_absolute() else Path(top) / base) / name
    hooks = _git(workspace, "rev-parse", "--path-format=absolute", "--git-path", "hooks")
    return Path(hooks) / name if hooks else None


@hookimpl
def snodo_validate(name: str, request: ValidationRequest) -> Verdict | None:
    if name != NAME:
        return None
    tooling = _tooling.checked(request, SETTINGS)
    hook_name = tooling.get("hook", "pre-commit")
    vid = request.validator.validator_id
    if not isinstance(hook_name, str) or not hook_name or "/" in hook_name or hook_name.startswith("."):
        raise ValidatorFault(f"validator {vid!r}: tooling.hook must be a hook name such as 'pre-commit'")
    hook = find_hook(request.workspace, hook_name)
    if hook is None:
        raise ValidatorFault(f"validator {vid!r}: {request.workspace} is not in a git work tree")
    if not hook.is_file() or not os.access(hook, os.X_OK):
        raise ValidatorFault(
            f"validator {vid!r}: no executable {hook_name} hook at {hook}",
            hint="install the project's hooks (e.g. `npx husky`), or drop the git-hooks validator",
        )
    top = Path(_git(request.workspace, "rev-parse", "--show-toplevel"))
    run = run_process([str(hook)], cwd=top, timeout=_tooling.timeout(request), stdin_text="")
    shown = run.tail(_OUTPUT_LINES)
    details = {"hook": str(hook), "exit_code": run.returncode, "output": shown, "timed_out": run.timed_out}
    if run.timed_out:
        raise ValidatorFault(f"validator {vid!r}: the {hook_name} hook did not finish in time")
    if run.ok:
        return Verdict(severity="pass", justification=f"the {hook_name} hook passed", details=details)
    output = f":\n{shown}" if shown.strip() else " (no output)"
    return Verdict(
        severity="blocker",
        justification=f"the {hook_name} hook failed (exit {run.returncode}){output}",
        details=details,
    )
