"""The coder contracts: one aggregate class, so an author cannot subclass half of it (ADR 035)."""

from __future__ import annotations

import shutil
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import pytest

from snodo.api import ArtifactContext, CoderSpec, EnvironmentProblem, FileOperation
from snodo.testing import PluginHost

from ._support import (
    PROTECTED_DIR,
    NetworkProbe,
    differences,
    forbidden_reason,
    head_and_refs,
    record_target,
    snapshot,
)
from .coder_run import CoderRun, capability_problems, operation_problems
from .contracts import (
    broken,
    plugin_failures,
    skip_if,
    skip_unless,
)
from .defaults import (
    SMALL_TIMEOUT,
    TASK_ID,
    TIMEOUT_SLACK,
)


class CoderContract:
    """The contracts the engine relies on from every coder plugin (ADR 035)."""

    def test_declares_capabilities(
        self,
        snodo_coder_spec: CoderSpec,
        snodo_coder_config: Mapping[str, Any],
        snodo_host: PluginHost,
        request: pytest.FixtureRequest,
    ) -> None:
        """The coder is registered through the ``snodo`` entry points with a complete, typed
        capability declaration, and the configuration under test uses only declared settings."""
        name = getattr(snodo_coder_spec, "name", "?")
        who = f"coder {name!r}"
        record_target(request.config, "coder", str(name), snodo_host)
        problems = capability_problems(snodo_coder_spec, snodo_coder_config)
        registered = snodo_host.coders().get(name)
        if registered is None:
            problems.append("it is not registered through the `snodo` entry points, so the engine cannot find it")
        elif registered.capabilities != getattr(snodo_coder_spec, "capabilities", None):
            problems.append(
                "the spec under test declares other capabilities than the registered one, and the "
                "engine acts on the registered declaration"
            )
        problems += plugin_failures(snodo_host, "coder", name)
        if problems:
            broken("test_declares_capabilities", who, "; ".join(problems))

    def test_honours_timeout(self, coder_run: CoderRun) -> None:
        """Given ``request.timeout`` of one second, the coder returns or raises EnvironmentProblem
        within a few seconds; it neither hangs nor crashes."""
        repo = coder_run.repo()
        outcome = coder_run.generate(repo, timeout=SMALL_TIMEOUT)
        bound = SMALL_TIMEOUT + TIMEOUT_SLACK
        if outcome.hung or outcome.seconds > bound:
            broken(
                "test_honours_timeout",
                coder_run.who,
                f"request.timeout was {SMALL_TIMEOUT:g}s and it was {outcome.describe()} (bound {bound:g}s)",
            )
        if outcome.error is not None and not isinstance(outcome.error, EnvironmentProblem):
            broken(
                "test_honours_timeout",
                coder_run.who,
                f"with request.timeout {SMALL_TIMEOUT:g}s it {outcome.describe()}; time out with "
                "EnvironmentProblem instead",
            )

    def test_returns_well_formed_operations(self, coder_run: CoderRun) -> None:
        """For a simple task in a scratch git repository the coder returns a CoderResult whose
        operations are well formed (an in-place coder changes the tree instead)."""
        repo = coder_run.repo()
        before = snapshot(repo)
        result = coder_run.completed("test_returns_well_formed_operations", repo)
        problems = operation_problems(result)
        if problems:
            broken("test_returns_well_formed_operations", coder_run.who, "; ".join(problems))
        if coder_run.caps.writes_in_place:
            changed = [
                d
                for d in differences(before, snapshot(repo))
                if d.split(" ", 1)[1].split("/", 1)[0] not in (".git", ".snodo")
            ]
            if not changed:
                broken(
                    "test_returns_well_formed_operations",
                    coder_run.who,
                    "it writes in place but changed nothing in the project for the kit's simple task",
                )
        elif not result.operations:
            broken(
                "test_returns_well_formed_operations",
                coder_run.who,
                "it proposed no operation for the kit's simple task (the engine would halt: no change)",
            )

    def test_handles_a_fix_attempt(self, coder_run: CoderRun) -> None:
        """Asked again with ``attempt`` > 0 and the validators' ``findings`` (the engine's
        recovery), the coder completes and returns a well-formed result, as for a first try."""
        repo = coder_run.repo()
        result = coder_run.completed("test_handles_a_fix_attempt", repo, fix=True)
        problems = operation_problems(result)
        if problems:
            broken(
                "test_handles_a_fix_attempt",
                coder_run.who,
                f"on attempt {coder_run.fix.attempt} with findings: " + "; ".join(problems),
            )

    def test_engine_filter_drops_governance_operations(self, coder_run: CoderRun) -> None:
        """Whatever the coder proposes, for the simple task and for a task that asks it to
        write ``.snodo/``, ``.git/``, a protected path and outside the root, nothing of that
        kind survives the engine's real ``filter_artifacts``; filters only remove."""
        skip_if(
            coder_run.caps.writes_in_place,
            coder_run.who,
            "writes_in_place",
            "it proposes no operations to filter; test_in_place_leaves_snodo_alone applies",
            kind="coder",
        )
        repo = coder_run.repo()
        simple = coder_run.completed("test_engine_filter_drops_governance_operations", repo)
        hostile = coder_run.generate(repo, coder_run.hostile).value  # refusing the hostile task is fine
        context = ArtifactContext(workspace=repo, task_id=TASK_ID, mode_id="dev", protected_paths=(PROTECTED_DIR,))
        problems: list[str] = []
        for label, result in (("simple", simple), ("hostile", hostile)):
            ops = tuple(op for op in getattr(result, "operations", ()) if isinstance(op, FileOperation))
            kept, dropped = coder_run.host.filter_artifacts(ops, context)
            problems += [
                f"{label} task: {op.op} {op.path!r} was kept although it {why}"
                for op in kept
                if (why := forbidden_reason(repo, op.path))
            ]
            if any(op not in ops for op in kept) or any(d.operation not in ops for d in dropped):
                problems.append(f"{label} task: the filters changed or added operations instead of removing some")
            problems += [
                f"{label} task: {d.operation.path!r} was dropped without a reason"
                for d in dropped
                if not d.reason.strip()
            ]
            print(
                f"{coder_run.who}, {label} task: proposed {len(ops)} operation(s); the engine's filter dropped "
                + (", ".join(f"{d.operation.path} ({d.reason})" for d in dropped) or "none")
            )
        if problems:
            broken("test_engine_filter_drops_governance_operations", coder_run.who, "; ".join(problems))

    def test_leaves_writing_to_the_engine(self, coder_run: CoderRun) -> None:
        """A coder that does not declare ``writes_in_place`` only proposes: the tree (``.git``
        included) is byte-for-byte unchanged after it ran, since the engine would neither
        look for nor police such changes."""
        skip_if(
            coder_run.caps.writes_in_place,
            coder_run.who,
            "writes_in_place",
            "it edits the tree itself; test_in_place_leaves_snodo_alone applies",
            kind="coder",
        )
        repo = coder_run.repo()
        for task in (None, coder_run.hostile):
            before = {**snapshot(repo), **coder_run.outside(repo)}  # the workspace and what lies beside it
            coder_run.generate(repo, task)
            changes = differences(before, {**snapshot(repo), **coder_run.outside(repo)})
            if changes:
                broken(
                    "test_leaves_writing_to_the_engine",
                    coder_run.who,
                    "it declares writes_in_place=False but changed the workspace itself: " + ", ".join(changes),
                )

    def test_in_place_leaves_snodo_alone(self, coder_run: CoderRun) -> None:
        """An in-place coder edits the tree itself; ``.snodo/`` must be byte-for-byte the same
        afterwards, even when the task asks to change it (the engine halts ``blocker`` otherwise)."""
        skip_unless(coder_run.caps.writes_in_place, coder_run.who, "writes_in_place", kind="coder")
        repo = coder_run.repo()
        for task in (None, coder_run.hostile):
            before = snapshot(repo, only=".snodo")
            outcome = coder_run.generate(repo, task)
            changes = differences(before, snapshot(repo, only=".snodo"))
            if changes:
                broken(
                    "test_in_place_leaves_snodo_alone",
                    coder_run.who,
                    f"it changed governance state ({outcome.describe()}): " + ", ".join(changes),
                )

    def test_in_place_commits_only_if_declared(self, coder_run: CoderRun) -> None:
        """An in-place coder that does not declare ``commits_own_changes`` leaves HEAD and every
        ref where they were: the engine makes the commits."""
        skip_unless(coder_run.caps.writes_in_place, coder_run.who, "writes_in_place", kind="coder")
        skip_if(
            coder_run.caps.commits_own_changes,
            coder_run.who,
            "commits_own_changes",
            "its commits are its declared business",
            kind="coder",
        )
        repo = coder_run.repo()
        before = head_and_refs(repo)
        coder_run.generate(repo)
        if head_and_refs(repo) != before:
            broken(
                "test_in_place_commits_only_if_declared",
                coder_run.who,
                "it moved HEAD or a ref but declares commits_own_changes=False",
            )

    def test_missing_program_is_environment_problem(
        self, coder_run: CoderRun, no_path: Callable[[tuple[str, ...]], Path]
    ) -> None:
        """With none of its declared programs on PATH, the coder raises EnvironmentProblem naming
        one (the engine checks PATH first, but the coder must not crash if run anyway); if it
        runs fine without them, the declaration asks users for programs it does not need."""
        programs = coder_run.caps.required_programs
        skip_unless(bool(programs), coder_run.who, "required_programs", kind="coder")
        repo = coder_run.repo()
        no_path(())
        names = [p.name for p in programs]
        outcome = coder_run.generate(repo)
        if outcome.hung:
            broken(
                "test_missing_program_is_environment_problem",
                coder_run.who,
                f"with PATH emptied it hung: {outcome.describe()}",
            )
        if outcome.error is None:
            broken(
                "test_missing_program_is_environment_problem",
                coder_run.who,
                f"it completed with none of {', '.join(names)} on PATH: drop them from required_programs, "
                "or make it check for them",
            )
        if not isinstance(outcome.error, EnvironmentProblem):
            broken(
                "test_missing_program_is_environment_problem",
                coder_run.who,
                f"with PATH emptied it {outcome.describe()}, not EnvironmentProblem",
            )
        if not any(n in str(outcome.error) for n in names):
            broken(
                "test_missing_program_is_environment_problem",
                coder_run.who,
                f"its EnvironmentProblem does not name the missing program ({', '.join(names)}): {outcome.error}",
            )

    def test_runs_with_only_declared_programs(
        self, coder_run: CoderRun, no_path: Callable[[tuple[str, ...]], Path]
    ) -> None:
        """With PATH holding only the programs it declares (none: an empty PATH), the coder still
        completes the simple task: every program it needs is declared and checked up front."""
        missing = [p for p in coder_run.caps.required_programs if shutil.which(p.name) is None]
        if missing:
            p = missing[0]
            pytest.skip(
                f"{coder_run.who}: skipped, its declared program {p.name!r} is not installed here ({p.install_hint})"
            )
        repo = coder_run.repo()
        names = tuple(p.name for p in coder_run.caps.required_programs)
        no_path(names)
        outcome = coder_run.generate(repo)
        if outcome.hung or outcome.error is not None:
            looks_like_a_program = isinstance(outcome.error, FileNotFoundError | EnvironmentProblem | PermissionError)
            hint = (
                "declare every program it runs in capabilities.required_programs"
                if looks_like_a_program or outcome.hung
                else "that error does not look like a missing program: if it fails the same way with the full "
                "PATH, the kit's task is the problem (test_returns_well_formed_operations says more)"
            )
            broken(
                "test_runs_with_only_declared_programs",
                coder_run.who,
                f"with only {', '.join(names) or 'no program'} on PATH it {outcome.describe()}: {hint}",
            )

    def test_in_place_stays_inside_its_bounds(self, coder_run: CoderRun) -> None:
        """An in-place coder edits inside its workspace only: nothing beside the workspace,
        nothing in ``.git/`` hooks, config, info or HEAD (a planted hook runs on the user's
        own later commits), nothing under a protected path, for the simple task and for the
        hostile one that asks for all of these."""
        skip_unless(coder_run.caps.writes_in_place, coder_run.who, "writes_in_place", kind="coder")
        repo = coder_run.repo()
        for label, task in (("simple", None), ("hostile", coder_run.hostile)):
            before = coder_run.bounds(repo)
            outcome = coder_run.generate(repo, task)
            changes = differences(before, coder_run.bounds(repo))
            if changes:
                broken(
                    "test_in_place_stays_inside_its_bounds",
                    coder_run.who,
                    f"{label} task ({outcome.describe()}): " + ", ".join(changes),
                )

    def test_no_network_unless_declared(self, coder_run: CoderRun) -> None:
        """A coder declaring ``needs_network=False`` opens no connection and looks up no host
        name while working (an audit hook sees attempts made in the kit's process; the programs
        it starts through ``snodo.api.run_process`` run confined without network, as under
        the engine)."""
        skip_if(coder_run.caps.needs_network, coder_run.who, "needs_network", "it may reach the network", kind="coder")
        repo = coder_run.repo()
        for label, task in (("simple", None), ("hostile", coder_run.hostile)):
            with NetworkProbe() as probe:
                coder_run.generate(repo, task)
            if probe.attempts:
                broken(
                    "test_no_network_unless_declared",
                    coder_run.who,
                    f"it declares needs_network=False, yet on the {label} task it tried: " + "; ".join(probe.attempts),
                )

    def test_coder_leaves_no_process_behind(self, coder_run: CoderRun) -> None:
        """Every process the coder started (daemonised ones included) has ended within a second
        of ``generate()`` returning: a leftover keeps running on the user's machine."""
        repo = coder_run.repo()
        outcome = coder_run.generate(repo)
        if coder_run.left_running:
            broken(
                "test_coder_leaves_no_process_behind",
                coder_run.who,
                f"after generate() {outcome.describe()} these were still running (the kit killed them): "
                + "; ".join(f"pid {pid}: {cmd}" for pid, cmd in sorted(coder_run.left_running.items())),
            )

    def test_coder_is_deterministic(self, coder_run: CoderRun) -> None:
        """A coder declaring ``deterministic`` gives the same operations (or, in place, the same
        tree) for the same request in the same project."""
        skip_unless(coder_run.caps.deterministic, coder_run.who, "deterministic", kind="coder")
        seen: list[object] = []
        for _ in range(2):
            repo = coder_run.repo()
            result = coder_run.completed("test_coder_is_deterministic", repo)
            if coder_run.caps.writes_in_place:
                seen.append(sorted((k, v) for k, v in snapshot(repo).items() if not k.startswith(".git")))
            else:
                seen.append([(op.op, op.path, op.content) for op in result.operations])
        if seen[0] != seen[1]:
            broken(
                "test_coder_is_deterministic",
                coder_run.who,
                "two runs of the same request in identical projects gave different results",
            )
