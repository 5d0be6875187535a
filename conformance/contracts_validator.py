"""The validator contracts: one aggregate class the shared runner and the four outcomes rely on (ADR 015)."""

from __future__ import annotations

from functools import partial

import pytest
from attrs import evolve

from snodo.api import Setting, ValidatorSpec
from snodo.testing import run_status

from ._support import (
    differences,
    snapshot,
)
from .contracts import (
    broken,
    plugin_failures,
    skip_unless,
)
from .defaults import (
    HANGING_FILES,
    SEVERITY_RANK,
    VALIDATOR_SLACK,
    VALIDATOR_TIMEOUT,
)
from .validator_run import ValidatorRun, inject_crash, verdict_problems


class ValidatorContract:
    """The contracts the shared runner and the four outcomes rely on from every validator (ADR 015)."""

    def test_registered_with_own_dispatch(self, validator_run: ValidatorRun) -> None:
        """The type is registered through the ``snodo`` entry points with a typed ValidatorSpec,
        the registering plugin implements ``snodo_validate``, and the tooling under test uses
        only declared settings."""
        spec, v = validator_run.spec, validator_run
        problems = []
        if not isinstance(spec, ValidatorSpec):
            problems.append(f"the registration is a {type(spec).__name__}, not a ValidatorSpec")
        else:
            if not isinstance(spec.description, str) or not spec.description.strip():
                problems.append("description is empty: `snodo plugins` shows it to users")
            for flag in ("needs_model", "deterministic"):
                if not isinstance(getattr(spec, flag), bool):
                    problems.append(f"{flag} is {getattr(spec, flag)!r}, not True or False")
            if not isinstance(spec.settings, tuple) or not all(isinstance(s, str) and s for s in spec.settings):
                problems.append(f"settings is {spec.settings!r}, not a tuple of tooling keys")
            else:
                tooling = v.config.get("tooling", {})
                problems += [m for _key, m in Setting.tooling_problems("under-test", v.name, spec.settings, tooling)]
        registered = v.host.validators().get(v.name)
        if registered is None:
            problems.append("it is not registered through the `snodo` entry points, so no protocol can name it")
        elif registered != spec:
            problems.append("the spec under test differs from the registered one, which is what the engine uses")
        problems += plugin_failures(v.host, "validator", v.name)
        if problems:
            broken("test_registered_with_own_dispatch", v.who, "; ".join(problems))
        v.own_impl("test_registered_with_own_dispatch")

    def test_finishes_within_timeout(self, validator_run: ValidatorRun) -> None:
        """With ``tooling.timeout`` of a few seconds, on a project whose test suite hangs, it
        returns or raises within that time (plus a little), killing whatever it started."""
        v = validator_run
        tooling = {**v.config.get("tooling", {}), "timeout": VALIDATOR_TIMEOUT}
        request = v.request("post_execute", v.workspace(HANGING_FILES), tooling=tooling)
        outcome = v.call(lambda: v.host.validate(request), VALIDATOR_TIMEOUT + VALIDATOR_SLACK)
        if outcome.hung:
            broken(
                "test_finishes_within_timeout",
                v.who,
                f"tooling.timeout was {VALIDATOR_TIMEOUT:g}s and it was {outcome.describe()}; "
                "the runner abandons it and reports an error",
            )

    @pytest.mark.parametrize("phase", ["pre_execute", "post_execute"])
    def test_returns_a_verdict(self, validator_run: ValidatorRun, phase: str) -> None:
        """For an ordinary request (a small passing project) in either phase, its own
        ``snodo_validate`` returns a Verdict: severity exactly one of pass, warn, blocker, a
        non-empty justification, and JSON-serialisable details (they go into the audit log)."""
        v = validator_run
        request = v.request(phase, v.workspace())
        impl = v.own_impl("test_returns_a_verdict")
        outcome = v.call(lambda: impl(request), request.timeout + VALIDATOR_SLACK)
        if outcome.hung or outcome.error is not None:
            broken(
                "test_returns_a_verdict",
                v.who,
                f"on the kit's ordinary {phase} request it {outcome.describe()}\nIf it needs settings "
                "(a model, tooling), pass them with --snodo-validator-config=JSON|FILE or the "
                "`snodo_validator_config` fixture.",
            )
        if outcome.value is None:
            broken("test_returns_a_verdict", v.who, f"it returned None for its own type {v.name!r}")
        problems = verdict_problems(outcome.value)
        if problems:
            broken("test_returns_a_verdict", v.who, "; ".join(problems))

    def test_answers_only_its_own_type(self, validator_run: ValidatorRun) -> None:
        """Asked about a validator type that is not its own, its ``snodo_validate`` returns None
        (one plugin may register several types; it must not answer for a name it was not asked)."""
        v = validator_run
        request = v.request("pre_execute", v.workspace())
        foreign = evolve(request, validator=evolve(request.validator, validator_type="snodo-conformance-foreign"))
        impl = v.own_impl("test_answers_only_its_own_type")
        outcome = v.call(lambda: impl(foreign), VALIDATOR_TIMEOUT)
        if outcome.hung or outcome.error is not None or outcome.value is not None:
            broken(
                "test_answers_only_its_own_type",
                v.who,
                f"for the type 'snodo-conformance-foreign' it {outcome.describe()} instead of returning None",
            )

    def test_crash_fails_closed(self, validator_run: ValidatorRun) -> None:
        """A request it cannot handle never passes through the runner: with a workspace that
        does not exist it does not pass (unless its verdict provably ignores the workspace),
        and a crash injected into its tooling becomes an ``error`` result (not swallowed)."""
        v = validator_run
        real = v.through_runner(v.request("post_execute", v.workspace()))
        missing = v.request("post_execute", v._tmp / "no-such-workspace")
        vanished = v.through_runner(missing)
        workspace_blind = (vanished.severity, vanished.justification) == (real.severity, real.justification)
        if vanished.severity == "pass" and not workspace_blind:
            broken(
                "test_crash_fails_closed",
                v.who,
                f"with a workspace that does not exist it passed: {vanished.justification!r}",
            )
        crashing, tooling = inject_crash(v.request("post_execute", v.workspace()))
        crashed = v.through_runner(crashing)
        if tooling.touched and crashed.severity != "error":
            broken(
                "test_crash_fails_closed",
                v.who,
                f"reading its tooling raised, yet the runner got {crashed.severity!r} "
                f"({crashed.justification!r}): it swallowed its own crash",
            )
        for result in (vanished, crashed):
            status = run_status([result], policy="any")
            if result.severity == "error" and status != "validator_error":
                broken("test_crash_fails_closed", v.who, f"an error result was classified {status!r}")
        if not tooling.touched and workspace_blind and vanished.severity == "pass":
            pytest.skip(
                f"{v.who}: skipped, the validator reads neither its workspace nor its tooling, "
                "so the kit cannot make it crash"
            )

    def test_severity_cap_applies_but_never_to_errors(self, validator_run: ValidatorRun) -> None:
        """Through the runner, ``severity_cap`` lowers a verdict to the cap and keeps the
        original; an error (an injected crash) is never capped, even to ``pass``."""
        v = validator_run
        ws = v.workspace(v.failing.files)
        uncapped = v.through_runner(v.request("post_execute", ws, case=v.failing))
        for cap in ("pass", "warn"):
            got = v.through_runner(v.request("post_execute", ws, case=v.failing, cap=cap))
            if uncapped.severity == "error" or got.severity == "error":
                continue  # no verdict to cap on this workspace; errors are checked below
            problems = []
            if SEVERITY_RANK[got.severity] > SEVERITY_RANK[cap]:
                problems.append(f"with severity_cap {cap!r} the runner reported {got.severity!r}")
            if got.severity_original is not None and (
                got.severity != cap or SEVERITY_RANK[got.severity_original] <= SEVERITY_RANK[cap]
            ):
                problems.append(f"capped {got.severity_original!r} to {got.severity!r} under cap {cap!r}")
            if v.spec.deterministic:
                want = min(uncapped.severity, cap, key=SEVERITY_RANK.__getitem__)
                want_original = uncapped.severity if want != uncapped.severity else None
                if (got.severity, got.severity_original) != (want, want_original):
                    problems.append(
                        f"uncapped it says {uncapped.severity!r}; capped at {cap!r} the runner "
                        f"reported {got.severity!r} (original {got.severity_original!r})"
                    )
            if problems:
                broken("test_severity_cap_applies_but_never_to_errors", v.who, "; ".join(problems))
        crashing, tooling = inject_crash(v.request("post_execute", ws, case=v.failing, cap="pass"))
        crashed = v.through_runner(crashing)
        if tooling.touched and crashed.severity != "error":
            broken(
                "test_severity_cap_applies_but_never_to_errors",
                v.who,
                f"a crash under severity_cap 'pass' was reported as {crashed.severity!r}, not an error",
            )
        if uncapped.severity == "pass":
            pytest.skip(
                f"{v.who}: skipped, it passes the kit's failing case, so a cap has nothing to lower "
                "(errors were checked); override `snodo_validator_failing_case` with a case it fails"
            )

    def test_does_not_modify_workspace(self, validator_run: ValidatorRun) -> None:
        """Judging (either phase, a passing and a failing project) leaves every byte of the
        workspace, ``.git`` included, as it was."""
        v = validator_run
        for case in (v.passing, v.failing):
            ws = v.workspace(case.files)
            before = snapshot(ws)
            for phase in ("pre_execute", "post_execute"):
                v.through_runner(v.request(phase, ws, case=case))
                changes = differences(before, snapshot(ws))
                if changes:
                    broken("test_does_not_modify_workspace", v.who, f"{phase}: " + ", ".join(changes))

    def test_validator_is_deterministic(self, validator_run: ValidatorRun) -> None:
        """A validator declaring ``deterministic`` gives the same severity twice for the same
        request and tree (justifications may differ, e.g. in timings)."""
        v = validator_run
        skip_unless(v.spec.deterministic, v.who, "deterministic", kind="validator")
        ws = v.workspace()
        first, second = (v.through_runner(v.request("post_execute", ws)) for _ in range(2))
        if first.severity != second.severity:
            broken(
                "test_validator_is_deterministic",
                v.who,
                f"the same request gave {first.severity!r} ({first.justification!r}) and then "
                f"{second.severity!r} ({second.justification!r})",
            )

    def test_validator_leaves_no_process_behind(self, validator_run: ValidatorRun) -> None:
        """Every process the validator started (daemonised ones included) has ended within a
        second of its verdict, on a passing and on a failing project."""
        v = validator_run
        impl = v.own_impl("test_validator_leaves_no_process_behind")
        for case in (v.passing, v.failing):
            request = v.request("post_execute", v.workspace(case.files), case=case)
            outcome = v.call(partial(impl, request), request.timeout + VALIDATOR_SLACK)
            if v.left_running:
                broken(
                    "test_validator_leaves_no_process_behind",
                    v.who,
                    f"after it {outcome.describe()} these were still running (the kit killed them): "
                    + "; ".join(f"pid {pid}: {cmd}" for pid, cmd in sorted(v.left_running.items())),
                )

    def test_without_model_is_an_error(self, validator_run: ValidatorRun) -> None:
        """A validator declaring ``needs_model``, configured without a model, yields an error
        result through the runner: a check that did not run must never look like a pass."""
        v = validator_run
        skip_unless(v.spec.needs_model, v.who, "needs_model", kind="validator")
        result = v.through_runner(v.request("post_execute", v.workspace(), model=None))
        if result.severity != "error":
            broken(
                "test_without_model_is_an_error",
                v.who,
                f"with no model configured the runner got {result.severity!r}: {result.justification!r}",
            )
