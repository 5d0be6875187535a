"""The ``pytest`` validator: the project's tests judge the change, per test, against the base.

snodo's judge (:func:`snodo.api.judge_tests`, docs/judging.md) runs the base's tests in a
copy holding the change's source and the base's tests and harness, isolated and recorded
test by test by snodo's own plugin; every test that passed at the base must pass, and every
test the task names. Added test modules run in a session of their own; ``tooling.held_out``
names a directory of tests the agent never sees. A change to the tests or their harness
escalates with its diff, whatever the policy. ``tooling.command`` gives pytest's options
and paths (``python -m pytest -q tests``: reporting options are ignored); ``tooling.plugins``
names the pytest plugins to load (autoload is off); ``tooling.python``/``pythonpath`` as in
docs/validators.md. See docs/judging.md.
"""

from __future__ import annotations

from collections.abc import Iterator

from snodo.api import Setting, ValidationRequest, ValidatorSpec, Verdict, hookimpl

from . import _testrun, _tooling

NAME = "pytest"
SETTINGS = (
    Setting("command", "command"),
    Setting("python", "text"),
    Setting("pythonpath", "paths"),
    "timeout",
    Setting("plugins", "strings"),
    Setting("held_out", "text"),
)


@hookimpl
def snodo_validators() -> Iterator[ValidatorSpec]:
    yield ValidatorSpec(
        name=NAME,
        description="judges the change by the project's tests, per test, against the base commit",
        needs_model=False,
        judges_objects=True,
        deterministic=True,
        settings=SETTINGS,
    )


@hookimpl
def snodo_validate(name: str, request: ValidationRequest) -> Verdict | None:
    if name != NAME:
        return None
    tooling = _tooling.checked(request, SETTINGS)
    return _testrun.judged_verdict(request, tooling, timeout=_tooling.timeout(request))
