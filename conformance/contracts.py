"""The contracts' names and titles, which of them protect users, and how the kit reports them.

Every failure names the contract it breaks; every skip names the plugin and the
capability it does (not) declare; a plugin that hung once is not called again.
"""

from __future__ import annotations

from typing import Any, NoReturn

import pytest

from snodo.testing import PluginHost

from ._support import Outcome

#: test name -> the contract it checks, as failures and docs/conformance.md name it.
CONTRACTS: dict[str, str] = {
    # coders
    "test_declares_capabilities": "registered with a complete capability declaration",
    "test_returns_well_formed_operations": "returns well-formed file operations for a simple task",
    "test_handles_a_fix_attempt": "handles a fix attempt (attempt > 0, with findings) like any task",
    "test_engine_filter_drops_governance_operations": (
        "no .snodo/, .git/, protected or out-of-root operation gets past the engine's artifact filter"
    ),
    "test_leaves_writing_to_the_engine": "a coder that does not write in place changes nothing itself",
    "test_in_place_leaves_snodo_alone": "an in-place coder changes nothing under .snodo/",
    "test_in_place_commits_only_if_declared": "an in-place coder commits only if it declares commits_own_changes",
    "test_missing_program_is_environment_problem": (
        "a missing required program is an EnvironmentProblem naming it, not a crash"
    ),
    "test_runs_with_only_declared_programs": "runs with only its declared programs on PATH",
    "test_honours_timeout": "finishes or raises EnvironmentProblem within its timeout",
    "test_coder_is_deterministic": "a deterministic coder gives the same result for the same request",
    "test_in_place_stays_inside_its_bounds": (
        "an in-place coder writes nothing outside its workspace, in .git/ (hooks, config, HEAD) or a protected path"
    ),
    "test_no_network_unless_declared": "a coder declaring needs_network=False makes no network attempt",
    "test_coder_leaves_no_process_behind": "a coder leaves no process running after generate() returns",
    # validators
    "test_registered_with_own_dispatch": "registered, and its own snodo_validate answers for its type",
    "test_returns_a_verdict": "returns a Verdict: exactly one of pass/warn/blocker, with a justification",
    "test_answers_only_its_own_type": "returns None for validator types it does not own",
    "test_crash_fails_closed": "a crash becomes an error result through the runner, never a pass",
    "test_severity_cap_applies_but_never_to_errors": "severity_cap lowers verdicts through the runner, never errors",
    "test_does_not_modify_workspace": "leaves the workspace exactly as it found it",
    "test_finishes_within_timeout": "finishes within its tooling.timeout",
    "test_validator_is_deterministic": "a deterministic validator gives the same severity for the same input",
    "test_without_model_is_an_error": "a model-needing validator with no model is an error, never a pass",
    "test_validator_leaves_no_process_behind": "a validator leaves no process running after it returns",
}

#: The contracts that protect users: they cannot be listed as known failures, and an xfail
#: put on them any other way (a marker, ``pytest.xfail``) turns into a failure.
SAFETY_CONTRACTS = frozenset(
    {
        "test_engine_filter_drops_governance_operations",
        "test_leaves_writing_to_the_engine",
        "test_in_place_leaves_snodo_alone",
        "test_in_place_commits_only_if_declared",
        "test_in_place_stays_inside_its_bounds",
        "test_no_network_unless_declared",
        "test_coder_leaves_no_process_behind",
        "test_crash_fails_closed",
        "test_does_not_modify_workspace",
        "test_without_model_is_an_error",
        "test_validator_leaves_no_process_behind",
    }
)


def broken(contract_test: str, who: str, detail: str) -> NoReturn:
    """Fail naming the contract, the plugin and what went wrong."""
    pytest.fail(f'{who} breaks the contract "{CONTRACTS[contract_test]}" ({contract_test}): {detail}', pytrace=False)


def skip_unless(declared: bool, who: str, what: str, *, kind: str) -> None:
    """Skip naming the plugin and the capability it does not declare."""
    if not declared:
        pytest.skip(f"{who}: skipped, the {kind} does not declare {what}")


def skip_if(declared: bool, who: str, what: str, why: str, *, kind: str) -> None:
    """Skip naming the plugin and the capability it declares."""
    if declared:
        pytest.skip(f"{who}: skipped, the {kind} declares {what} ({why})")


def bare(name: str) -> str:
    """The kit test a name means: without its class, ``file::`` prefix or parameters."""
    return name.split("[", maxsplit=1)[0].rsplit("::", maxsplit=1)[-1]


class Abandoned:
    """The plugins the kit gave up on in this session: a call that outlived its bound.

    A hung call may still be running in its (daemon) thread; calling the plugin again would
    only stack more of them and make every later test wait out its bound. So the first hang
    fails its own test, and every later test of that plugin is skipped at once, naming it.
    """

    def __init__(self) -> None:
        self._why: dict[str, str] = {}

    def note(self, who: str, test: str, call: str, outcome: Outcome[Any]) -> None:
        if outcome.hung and who not in self._why:
            self._why[who] = f"in {test} {call} was {outcome.describe()} and may still be running"

    def hang(self, who: str, why: str) -> None:
        self._why.setdefault(who, why)

    def skip_if_abandoned(self, who: str) -> None:
        if who in self._why:
            pytest.skip(f"{who}: not called again, the kit gave up on it: {self._why[who]}")


_ABANDONED = pytest.StashKey[Abandoned]()


def session_abandoned(request: pytest.FixtureRequest) -> Abandoned:
    stash = request.config.stash
    if _ABANDONED not in stash:
        stash[_ABANDONED] = Abandoned()
    return stash[_ABANDONED]


def plugin_failures(host: PluginHost, kind: str, name: str) -> list[str]:
    owner = host.owner_of(kind, name)
    return [f"{who}: {error}" for who, error in host.failures() if owner and f'"{owner}"' in who]
