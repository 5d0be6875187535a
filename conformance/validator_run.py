"""A validator type under test, run on its own and through the engine's shared runner."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import Any, NoReturn, TypeVar

import pytest
from attrs import evolve

from snodo.api import Mode, ValidationRequest, Validator, ValidatorSpec, Verdict
from snodo.testing import PluginHost, ProtocolDocument, ValidatorResult, parse_protocol_document, run_validator

from ._support import (
    Outcome,
    ProcessWatch,
    bounded,
    json_problem,
    make_repo,
    once,
    record_target,
)
from .cases import ValidatorCase
from .contracts import (
    Abandoned,
    broken,
    session_abandoned,
)
from .defaults import (
    FAILING_CASE,
    ORDINARY_TIMEOUT,
    PASSING_CASE,
    SEVERITY_RANK,
    TASK_ID,
    VALIDATOR_CONFIG_KEYS,
)

T = TypeVar("T")


class ValidatorRun:
    """One validator type under test, its configuration, and ways to run it as the engine does."""

    def __init__(
        self,
        spec: ValidatorSpec,
        config: Mapping[str, Any],
        host: PluginHost,
        tmp: Path,
        *,
        abandoned: Abandoned,
        test: str = "?",
        passing: ValidatorCase | None = None,
        failing: ValidatorCase | None = None,
    ) -> None:
        self.abandoned = abandoned
        self.test = test
        self.passing = passing or PASSING_CASE
        self.failing = failing or FAILING_CASE
        unknown = sorted(str(k) for k in config if k not in VALIDATOR_CONFIG_KEYS)
        if unknown:
            pytest.fail(
                f"snodo_validator_config: unknown key(s) {', '.join(unknown)}; "
                f"it may hold {', '.join(VALIDATOR_CONFIG_KEYS)}",
                pytrace=False,
            )
        self.spec = spec
        self.name = spec.name
        self.config = dict(config)
        self.host = host
        self._tmp = tmp
        self._count = 0
        self.who = f"validator {spec.name!r}"
        self.left_running: dict[int, str] = {}
        abandoned.skip_if_abandoned(self.who)

    def call(self, fn: Callable[[], T], seconds: float) -> Outcome[T]:
        """A bounded call of the validator; a hang makes the kit give up on it for the session.
        What it leaves running is killed and kept in ``left_running``."""
        self.abandoned.skip_if_abandoned(self.who)
        watch = ProcessWatch()
        outcome = bounded(fn, seconds)
        self.left_running = watch.leftovers()
        self.abandoned.note(self.who, self.test, "snodo_validate", outcome)
        return outcome

    def workspace(self, files: Mapping[str, str] | None = None) -> Path:
        self._count += 1
        return make_repo(self._tmp / f"project-{self._count}", self.passing.files if files is None else files)

    def protocol(
        self, phase: str, *, cap: str | None = None, model: Any = ..., tooling: Mapping[str, Any] | None = None
    ) -> tuple[ProtocolDocument, Mode, Validator]:
        """A one-mode protocol holding this validator, parsed by the real strict loader."""
        validator: dict[str, Any] = {
            "validator_id": "under-test",
            "validator_type": self.name,
            "evaluation_phase": phase,
            "criteria": list(self.config.get("criteria", ())),
            "tooling": dict(self.config.get("tooling", {}) if tooling is None else tooling),
        }
        validator["tooling"].setdefault("timeout", ORDINARY_TIMEOUT)  # the kit's bound unless the author set one
        chosen = self.config.get("model") if model is ... else model
        if chosen is not None:
            validator["model"] = chosen
        if cap is not None:
            validator["severity_cap"] = cap
        doc = {
            "protocol_id": "conformance",
            "name": "snodo conformance kit",
            "version": "1.0.0",
            "modes": [
                {
                    "mode_id": "dev",
                    "name": "Development",
                    "tools": ["read", "edit", "test"],
                    "validators": ["under-test"],
                    "coder": "mock",
                }
            ],
            "validators": [validator],
        }
        try:
            protocol = parse_protocol_document(doc, source="snodo_validator_config")
        except Exception as exc:
            pytest.fail(f"{self.who}: the kit's protocol with this configuration is refused: {exc}", pytrace=False)
        return protocol, protocol.modes[0], protocol.validators[0]

    def request(
        self, phase: str, workspace: Path, task: str | None = None, *, case: ValidatorCase | None = None, **kw: Any
    ) -> ValidationRequest:
        case = case or self.passing
        task = case.task if task is None else task
        protocol, mode, validator = self.protocol(phase, **kw)
        return ValidationRequest(
            validator=validator,
            task_id=TASK_ID,
            task_spec=task,
            phase=phase,
            mode=mode,
            protocol=protocol,
            workspace=workspace,
            changed_files=case.changed() if phase == "post_execute" else (),
            timeout=validator.timeout,
        )

    def through_runner(self, request: ValidationRequest) -> ValidatorResult:
        """The result the shared runner reports for this request: what the engine acts on."""
        self.abandoned.skip_if_abandoned(self.who)
        started = time.monotonic()
        watch = ProcessWatch()
        result = run_validator(self.host, request)
        took = time.monotonic() - started
        self.left_running = watch.leftovers()
        if result.severity == "error" and took >= request.timeout:
            self.abandoned.hang(
                self.who,
                f"in {self.test} it gave no verdict within tooling.timeout {request.timeout:g}s "
                "and may still be running",
            )
        return result

    def own_impl(self, contract_test: str) -> Callable[[ValidationRequest], Any]:
        """The registering plugin's own ``snodo_validate``, to see exactly what it returns."""
        owner = self.host.owner_of("validator", self.name)
        if owner is None:
            broken(contract_test, self.who, "it is not registered through the `snodo` entry points")
        impls = [
            i
            for i in self.host.pm.hook.snodo_validate.get_hookimpls()
            if i.plugin_name == owner and not (i.hookwrapper or i.wrapper)
        ]
        if not impls:
            broken(
                contract_test,
                self.who,
                f"plugin {owner!r} registers the type but implements no snodo_validate to answer for it",
            )
        ask = self.host.caller_for("snodo_validate", owner)
        return lambda req: ask(name=req.validator.validator_type, request=req)


@pytest.fixture
def validator_run(
    snodo_validator_spec: ValidatorSpec,
    snodo_validator_config: Mapping[str, Any],
    snodo_validator_passing_case: ValidatorCase,
    snodo_validator_failing_case: ValidatorCase,
    snodo_host: PluginHost,
    tmp_path: Path,
    request: pytest.FixtureRequest,
) -> ValidatorRun:
    record_target(request.config, "validator", str(getattr(snodo_validator_spec, "name", "?")), snodo_host)
    return once(
        request,
        f"validator {getattr(snodo_validator_spec, 'name', '?')!r}",
        lambda: ValidatorRun(
            snodo_validator_spec,
            snodo_validator_config,
            snodo_host,
            tmp_path,
            abandoned=session_abandoned(request),
            test=request.node.name,
            passing=snodo_validator_passing_case,
            failing=snodo_validator_failing_case,
        ),
    )


class CrashingTooling(Mapping[str, Any]):
    """A ``tooling`` mapping whose reading crashes, except the ``timeout`` the runner reads."""

    def __init__(self, real: Mapping[str, Any]) -> None:
        self._real = dict(real)
        self.touched = False

    def _crash(self) -> NoReturn:
        self.touched = True
        raise RuntimeError("snodo conformance kit: injected crash while reading tooling")

    def get(self, key: str, default: Any = None) -> Any:
        if key == "timeout":
            return self._real.get(key, default)
        self._crash()

    def __getitem__(self, key: str) -> Any:
        self._crash()

    def __iter__(self) -> Iterator[str]:
        self._crash()

    def __len__(self) -> int:
        self._crash()
        return 0  # never reached; keeps the protocol's return type honest

    def __contains__(self, key: object) -> bool:
        self._crash()

    def __repr__(self) -> str:
        return "<tooling that crashes when read>"


def inject_crash(request: ValidationRequest) -> tuple[ValidationRequest, CrashingTooling]:
    tooling = CrashingTooling(request.validator.tooling)
    validator = evolve(request.validator)
    # past the record's freezing converter, which would read (and so trip) the mapping itself
    object.__setattr__(validator, "tooling", tooling)
    return evolve(request, validator=validator), tooling


def verdict_problems(value: Any) -> list[str]:
    if not isinstance(value, Verdict):
        return [f"it returned {type(value).__name__} {value!r:.200}, not a Verdict"]
    problems = []
    if value.severity not in SEVERITY_RANK:
        problems.append(f"severity {value.severity!r} is not one of pass, warn, blocker")
    if not isinstance(value.justification, str) or not value.justification.strip():
        problems.append("the justification is empty")
    if not isinstance(value.details, Mapping):
        problems.append(f"details is a {type(value.details).__name__}, not a mapping")
    elif problem := json_problem(dict(value.details)):
        problems.append(f"details cannot go into the audit log as JSON: {problem}")
    return problems
