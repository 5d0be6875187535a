"""What a validator asks (:func:`snodo.api.judge_tests`): the change against its base, else each test passing."""

from __future__ import annotations

import shlex
from collections import Counter
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from snodo.base.errors import ValidatorFault
from snodo.plugin.records import ValidationRequest

from .judge import Judge, Judgement, foreign_message, judge_change
from .session import run_session
from .tooling import DOCS, Options, command_argv, held_out_dir, options_from_command


def judge_tests(request: ValidationRequest, tooling: Mapping[str, Any], *, timeout: float | None = None) -> Judgement:
    """Judge the request's work by its tests; :class:`ValidatorFault` when there is no verdict."""
    argv = command_argv(tooling.get("command"))
    if (parsed := options_from_command(argv)) is None:
        raise ValidatorFault(
            f"tooling.command {shlex.join(argv)!r} does not run pytest, so no test can be judged: an exit "
            "status alone proves nothing",
            hint=f"run pytest (python -m pytest …) or judge the command with a `command` hook validator; see {DOCS}",
        )
    project_root = Path(request.project_root or request.workspace)
    options = Options(
        options=parsed[0],
        paths=parsed[1],
        plugins=tuple(tooling.get("plugins") or ()),
        timeout=float(timeout if timeout is not None else tooling.get("timeout") or request.timeout),
        held_out=held_out_dir(tooling.get("held_out"), project_root),
        python=tooling.get("python"),
        pythonpath=tooling.get("pythonpath"),
        execution_python=request.protocol.execution.python,
        require_all=request.phase == "pre_execute",
    )
    work = request.work
    if work is None or not work.base or not (tree := work.tree()):
        return judge_workspace(Path(request.workspace), project_root, options)
    judge = Judge(
        work.repo,
        base=work.base,
        tree=tree,
        project_root=project_root,
        options=options,
        spec=request.task_spec,
        cache=work.cache,
    )
    return judge_change(judge)


def judge_workspace(workspace: Path, project_root: Path, options: Options) -> Judgement:
    """No base to compare with: the workspace's tests, run once, must all pass."""
    if options.held_out is not None:
        raise ValidatorFault("held-out tests need a base commit to judge against (a git repository with a commit)")
    setup = options.setup(workspace, project_root)
    outcome = run_session(workspace, setup, options.pytest_args(None), timeout=options.timeout, checkout=project_root)
    s = outcome.session
    if s is None:
        raise ValidatorFault(
            f"the tests could not be judged: {outcome.problem}:\n{outcome.tail}",
            hint=f"the tests ran with {setup.python} ({setup.python_source}); if that is the wrong one, set "
            f"execution.python in .snodo/protocol.yml (or tooling.python); see {DOCS}",
        )
    if s.foreign:
        raise ValidatorFault(foreign_message(s.foreign, workspace))
    bad = s.problems()
    details: dict[str, Any] = {
        "base": None,
        "python": f"{setup.python} ({setup.python_source})",
        "exit_code": outcome.exit_code,
        "output_tail": outcome.tail,
        "pythonpath": list(setup.pythonpath),
        "after": dict(Counter(s.status.values())),
        "summary": s.tally(),
        "broken": bad[:200],
        "failed_tests": s.failed()[:50],
        "output_excerpt": s.failures(),
    }
    severity, text = "pass", f"tests judged without a base: {s.tally()}"
    if not s.status and not s.collect_errors:
        severity, text = "warn", "no tests collected; nothing was verified"
    elif bad:
        shown = "; ".join(bad[:20]) + (f"; and {len(bad) - 20} more" if len(bad) > 20 else "")
        severity, text = "blocker", f"{text}; not passing: {shown}"
    return Judgement(severity=severity, escalate=False, justification=text, details=details)
