"""The ``pytest`` validator: the project's own test suite, really run, decides.

``tooling.command`` (a string split like a shell would, or a list; default
``python -m pytest -q``) runs without a shell in the workspace, bounded by
``tooling.timeout`` (default: the runner's budget). A leading ``python`` is the interpreter
``tooling.python`` names (relative to the project root, e.g. ``.venv/bin/python``; default
snodo's own). The workspace's import roots come first on the path (detected, or
``tooling.pythonpath``), and a run that imported the project from elsewhere is no verdict.
Green is a pass, red or a collection error a blocker naming the failed tests, nothing
collected a warn; a timeout, a missing program or pytest's own crash is no verdict and raises.
See docs/validators.md.
"""

from __future__ import annotations

from collections.abc import Iterator

from snodo.api import Setting, ValidationRequest, ValidatorSpec, Verdict, hookimpl

from . import _testrun, _tooling

NAME = "pytest"
SETTINGS = ("command", Setting("python", "text"), "pythonpath", "timeout")


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
def snodo_validate(name: str, request: ValidationRequest) -> Verdict | None:
    if name != NAME:
        return None
    tooling = _tooling.checked(request, SETTINGS)
    dirty = _testrun.dirty_tree(request)
    return _testrun.verdict(_testrun.run_for(request, tooling), dirty)
