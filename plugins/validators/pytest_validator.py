"""The ``pytest`` validator: the project's own test suite, really run, decides.

``tooling.command`` (a string split like a shell would, or a list; default
``python -m pytest -q``, where a leading ``python`` is snodo's interpreter) runs without a
shell in the workspace, bounded by ``tooling.timeout`` (default: the runner's budget).
Green is a pass, red or a collection error a blocker, nothing collected a warn; a
timeout, a missing program or pytest's own crash is no verdict and raises.
"""

from __future__ import annotations

from collections.abc import Iterator

from snodo.api import ValidationRequest, ValidatorSpec, Verdict, hookimpl

from . import _testrun, _tooling

NAME = "pytest"
SETTINGS = ("command", "timeout")


@hookimpl
def snodo_validators() -> Iterator[ValidatorSpec]:
    yield ValidatorSpec(
        name=NAME,
        description="runs the project's tests (tooling.command) and judges by their outcome",
        needs_model=False,
        deterministic=True,
        settings=SETTINGS,
    )


@hookimpl
def snodo_validate(request: ValidationRequest) -> Verdict | None:
    if request.validator.validator_type != NAME:
        return None
    tooling = _tooling.checked(request, SETTINGS)
    run = _testrun.run_tests(request.workspace, tooling.get("command"), _tooling.timeout(request))
    return _testrun.verdict(run)
