"""The ``opencode`` coder: drives the opencode CLI, which edits the workspace itself.

It declares ``writes_in_place``: the engine snapshots the tree around the run and halts on
any ``.snodo/`` change, so this coder reports what happened and hides nothing. Failures of
the CLI (missing, hung, crashed) are the environment's, never a verdict on the work; the
process group is killed on a timeout so no helper it spawned outlives the run.

Settings (``coder_config``): ``model`` (passed as ``--model``), ``timeout`` (seconds;
default the engine's), ``silence_timeout`` (seconds without output), ``extra_args``
(a list inserted before the prompt).
"""

from __future__ import annotations

import shutil
from collections.abc import Iterator, Mapping
from typing import Any

from snodo.api import (
    CoderCapabilities,
    CoderRequest,
    CoderResult,
    CoderSpec,
    EnvironmentProblem,
    RequiredProgram,
    hookimpl,
    run_process,
)

from ._config import CoderConfig
from ._prompt import task_prompt

SETTINGS = ("model", "timeout", "silence_timeout", "extra_args")
PROGRAM = RequiredProgram(name="opencode", install_hint="npm install -g opencode-ai")


class OpencodeCoder:
    def __init__(self, config: Mapping[str, Any]) -> None:
        cfg = CoderConfig("opencode", config, SETTINGS)
        self.model = cfg.text("model")
        self.timeout = cfg.number("timeout")
        self.silence_timeout = cfg.number("silence_timeout")
        self.extra_args = cfg.strings("extra_args")

    def argv(self, request: CoderRequest) -> list[str]:
        model = ["--model", self.model] if self.model else []
        return [PROGRAM.name, "run", *model, *self.extra_args, task_prompt(request)]

    def generate(self, request: CoderRequest) -> CoderResult:
        if shutil.which(PROGRAM.name) is None:
            raise EnvironmentProblem(f"the opencode coder needs {PROGRAM.name!r} on PATH", hint=PROGRAM.install_hint)
        timeout = self.timeout or request.timeout
        result = run_process(
            self.argv(request),
            cwd=request.workspace,
            timeout=timeout,
            silence_timeout=self.silence_timeout,
            on_line=request.log,
        )
        if result.timed_out:
            raise EnvironmentProblem(f"opencode timed out after {timeout:g}s; its process group was killed")
        if result.silent_too_long:
            raise EnvironmentProblem(
                f"opencode timed out after {self.silence_timeout or 0:g}s without output; its process group was killed"
            )
        if result.returncode != 0:
            raise EnvironmentProblem(f"opencode exited with code {result.returncode}:\n{result.tail(20)}")
        return CoderResult(summary=result.tail(5) or "opencode finished", usage={"seconds": round(result.duration, 2)})


@hookimpl
def snodo_coders() -> Iterator[CoderSpec]:
    yield CoderSpec(
        name="opencode",
        description="runs `opencode run` in the workspace; it edits the files itself",
        capabilities=CoderCapabilities(
            writes_in_place=True,
            commits_own_changes=False,
            required_programs=(PROGRAM,),
            settings=SETTINGS,
            needs_network=True,
            deterministic=False,
        ),
        factory=OpencodeCoder,
    )
