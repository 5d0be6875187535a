"""A coder under test, run as the engine runs it, and the checks of what it declares and returns."""

from __future__ import annotations

import shutil
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import pytest
from attrs import evolve

from snodo.api import (
    CoderCapabilities,
    CoderRequest,
    CoderResult,
    CoderSpec,
    FileOperation,
    Mode,
    RequiredProgram,
    Setting,
)
from snodo.testing import PluginHost, confined_as_a_coder

from ._support import (
    PROTECTED_DIR,
    Outcome,
    ProcessWatch,
    bounded,
    json_problem,
    make_repo,
    once,
    record_target,
    snapshot,
)
from .cases import FixAttempt
from .contracts import (
    Abandoned,
    broken,
    session_abandoned,
)
from .defaults import (
    FIX_ATTEMPT,
    HOSTILE_TASK,
    NEIGHBOUR,
    ORDINARY_TIMEOUT,
    SCRATCH_FILES,
    TASK_ID,
    TIMEOUT_SLACK,
)


def _coder_request(workspace: Path, spec: str, config: Mapping[str, Any], timeout: float) -> CoderRequest:
    """What the engine would hand the coder for one task (same protected paths)."""
    return CoderRequest(
        task_id=TASK_ID,
        spec=spec,
        workspace=workspace,
        mode_id="dev",
        guidance="Scratch project of the snodo conformance kit.",
        protected_paths=(".snodo/", ".git/", PROTECTED_DIR),
        config=dict(config),
        timeout=timeout,
    )


class CoderRun:
    """One coder under test, its configuration and fresh scratch projects to run it in."""

    def __init__(
        self,
        spec: CoderSpec,
        config: Mapping[str, Any],
        task: str,
        host: PluginHost,
        tmp: Path,
        *,
        abandoned: Abandoned,
        test: str = "?",
        hostile: str = HOSTILE_TASK,
        fix: FixAttempt | None = None,
    ) -> None:
        self.spec = spec
        self.hostile = hostile
        self.fix = fix or FIX_ATTEMPT
        self.abandoned = abandoned
        self.test = test
        self.config = dict(config)
        self.task = task
        self.host = host
        self._tmp = tmp
        self._count = 0
        self.who = f"coder {spec.name!r}"
        abandoned.skip_if_abandoned(self.who)
        if not isinstance(spec.capabilities, CoderCapabilities):
            broken(
                "test_declares_capabilities",
                self.who,
                f"capabilities is a {type(spec.capabilities).__name__}, not a CoderCapabilities declaration; "
                "every other contract depends on it",
            )
        if host.coders().get(spec.name) is None:
            broken(
                "test_declares_capabilities",
                self.who,
                "it is not registered in the host under test (see `snodo plugins` for plugins that failed), "
                "so no snodo_generate hook can be asked for it",
            )
        mode = Mode(mode_id="dev", coder=spec.name, coder_config=self.config)
        outcome = bounded(
            lambda: host.pm.hook.snodo_preflight(
                mode=mode, coder=spec.name, coder_config=mode.coder_config, validators=()
            ),
            ORDINARY_TIMEOUT,
        )
        abandoned.note(self.who, test, "snodo_preflight", outcome)
        if outcome.error is not None or outcome.hung:
            pytest.fail(
                f"{self.who}: its preflight refused the kit's coder_config {self.config!r}: {outcome.describe()}\n"
                "Give it the settings it needs with --snodo-coder-config=JSON|FILE or by overriding the "
                "`snodo_coder_config` fixture in your conftest.py.",
                pytrace=False,
            )
        self.left_running: dict[int, str] = {}

    @property
    def caps(self) -> CoderCapabilities:
        return self.spec.capabilities

    def repo(self) -> Path:
        """A fresh scratch project, alone in a parent directory beside a neighbour's file."""
        self._count += 1
        parent = self._tmp / f"project-{self._count}"
        parent.mkdir(parents=True)
        (parent / NEIGHBOUR).write_text("a file next to the workspace\n", encoding="utf-8")
        return make_repo(parent / "work", SCRATCH_FILES)

    @staticmethod
    def outside(repo: Path) -> dict[str, str]:
        """Everything beside the workspace, in its parent, as ``../NAME`` entries."""
        return {
            f"../{k}": v
            for k, v in snapshot(repo.parent).items()
            if k != f"{repo.name}/" and not k.startswith(f"{repo.name}/")
        }

    def bounds(self, repo: Path) -> dict[str, str]:
        """What an in-place coder must leave alone: the workspace's parent (outside the
        workspace), ``.git``'s hooks, config, info and HEAD, and the protected path."""
        state = self.outside(repo)
        for part in ("hooks", "config", "info", "HEAD"):
            state.update(snapshot(repo, only=f".git/{part}"))
        state.update(snapshot(repo, only=PROTECTED_DIR))
        return state

    def generate(
        self, workspace: Path, task: str | None = None, timeout: float = ORDINARY_TIMEOUT, *, fix: bool = False
    ) -> Outcome[Any]:
        request = _coder_request(workspace, self.task if task is None else task, self.config, timeout)
        if fix:
            request = evolve(request, attempt=self.fix.attempt, findings=tuple(self.fix.findings))
        self.abandoned.skip_if_abandoned(self.who)
        watch = ProcessWatch()
        with confined_as_a_coder(workspace, network=bool(self.caps.needs_network), read_only=(PROTECTED_DIR,)):
            outcome = bounded(lambda: self.host.generate(self.spec.name, request), timeout + TIMEOUT_SLACK)
        self.left_running = watch.leftovers()  # killed: nothing leaks into the next test
        self.abandoned.note(self.who, self.test, "generate()", outcome)
        return outcome

    def completed(self, contract_test: str, workspace: Path, task: str | None = None, *, fix: bool = False) -> Any:
        """The result of an ordinary task, or a failure saying why there is none."""
        outcome = self.generate(workspace, task, fix=fix)
        if outcome.hung or outcome.error is not None:
            broken(
                contract_test,
                self.who,
                f"the kit's simple task did not complete: {outcome.describe()}\nIf the coder needs "
                "settings (a model, an offline mock_response), pass them with --snodo-coder-config=JSON|FILE "
                "or the `snodo_coder_config` fixture.",
            )
        return outcome.value


@pytest.fixture
def coder_run(
    snodo_coder_spec: CoderSpec,
    snodo_coder_config: Mapping[str, Any],
    snodo_coder_task: str,
    snodo_hostile_task: str,
    snodo_fix_attempt: FixAttempt,
    snodo_host: PluginHost,
    tmp_path: Path,
    request: pytest.FixtureRequest,
) -> CoderRun:
    record_target(request.config, "coder", str(getattr(snodo_coder_spec, "name", "?")), snodo_host)
    return once(
        request,
        f"coder {getattr(snodo_coder_spec, 'name', '?')!r}",
        lambda: CoderRun(
            snodo_coder_spec,
            snodo_coder_config,
            snodo_coder_task,
            snodo_host,
            tmp_path,
            abandoned=session_abandoned(request),
            test=request.node.name,
            hostile=snodo_hostile_task,
            fix=snodo_fix_attempt,
        ),
    )


@pytest.fixture
def no_path(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Callable[[tuple[str, ...]], Path]:
    """Replace PATH by a directory holding only the named programs (symlinks to the real ones)."""

    def only(programs: tuple[str, ...]) -> Path:
        found = {name: shutil.which(name) for name in programs}
        bin_dir = tmp_path / "path-with-only-declared-programs"
        bin_dir.mkdir(exist_ok=True)
        for name, real in found.items():
            if real is not None:
                (bin_dir / name).symlink_to(real)
        monkeypatch.setenv("PATH", str(bin_dir))
        return bin_dir

    return only


def operation_problems(result: Any) -> list[str]:
    if not isinstance(result, CoderResult):
        return [f"generate() returned {type(result).__name__}, not a CoderResult"]
    problems = []
    if not isinstance(result.operations, tuple | list):
        return [f"operations is {type(result.operations).__name__}, not a tuple of FileOperation"]
    for i, op in enumerate(result.operations):
        if not isinstance(op, FileOperation):
            problems.append(f"operations[{i}] is {type(op).__name__}, not a FileOperation")
            continue
        if op.op not in ("write", "delete"):
            problems.append(f"operations[{i}].op is {op.op!r}, not 'write' or 'delete'")
        if not isinstance(op.path, str) or not op.path.strip():
            problems.append(f"operations[{i}].path is {op.path!r}, not a non-empty path")
        if op.op == "write" and not isinstance(op.content, str):
            problems.append(f"operations[{i}] writes {op.path!r} without string content")
        if op.op == "delete" and op.content is not None:
            problems.append(f"operations[{i}] deletes {op.path!r} but carries content")
    if not isinstance(result.summary, str):
        problems.append(f"summary is {type(result.summary).__name__}, not a string")
    if not isinstance(result.usage, Mapping):
        problems.append(f"usage is {type(result.usage).__name__}, not a mapping")
    elif problem := json_problem(dict(result.usage)):
        problems.append(f"usage cannot be recorded as JSON: {problem}")
    return problems


def capability_problems(spec: Any, config: Mapping[str, Any]) -> list[str]:
    if not isinstance(spec, CoderSpec):
        return [f"the registration is a {type(spec).__name__}, not a CoderSpec"]
    problems = []
    if not isinstance(spec.description, str) or not spec.description.strip():
        problems.append("description is empty: `snodo plugins` shows it to users")
    caps = spec.capabilities
    if not isinstance(caps, CoderCapabilities):
        return [*problems, f"capabilities is a {type(caps).__name__}, not a CoderCapabilities declaration"]
    for flag in ("writes_in_place", "commits_own_changes", "needs_network", "deterministic"):
        value = getattr(caps, flag)
        if not isinstance(value, bool):
            problems.append(f"capabilities.{flag} is {value!r}, not True or False")
    if not isinstance(caps.required_programs, tuple):
        problems.append(f"capabilities.required_programs is a {type(caps.required_programs).__name__}, not a tuple")
    else:
        for prog in caps.required_programs:
            if not isinstance(prog, RequiredProgram):
                problems.append(f"required program {prog!r} is not a RequiredProgram")
            elif not isinstance(prog.name, str) or not prog.name.strip() or "/" in prog.name:
                problems.append(f"required program name {prog.name!r} is not a program name looked up on PATH")
            elif not isinstance(prog.install_hint, str) or not prog.install_hint.strip():
                problems.append(f"required program {prog.name!r} has no install_hint telling users how to get it")
    settings = caps.settings
    if not isinstance(settings, tuple) or not all(isinstance(s, str) and s for s in settings):
        problems.append(f"capabilities.settings is {settings!r}, not a tuple of setting names")
    else:
        problems += [message for _key, message in Setting.coder_config_problems(spec.name, settings, config)]
    return problems
