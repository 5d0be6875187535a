"""The snodo conformance kit as an opt-in pytest plugin.

It is not registered under ``pytest11``: nothing changes in anyone's pytest run until they
ask for it, with ``-p snodo_conformance.plugin`` or ``pytest_plugins =
["snodo_conformance.plugin"]`` in a rootdir ``conftest.py``. Then, in any directory (an
empty one is fine)::

    pytest -p snodo_conformance.plugin --snodo-coder NAME
    pytest -p snodo_conformance.plugin --snodo-validator NAME

checks the installed coder or validator type ``NAME``, found through the ``snodo`` entry
points exactly as the engine finds it. Instead of a name, a ``conftest.py`` at the rootdir
may override ``snodo_coder_spec`` / ``snodo_validator_spec`` (and ``snodo_coder_config`` /
``snodo_validator_config`` for settings such as a model), or ``snodo_host`` to supply the
plugin host itself. Known failures are listed with ``--snodo-xfail TEST`` or the ini option
``snodo_conformance_xfail``; they become strict xfails.

The kit's tests live in :mod:`snodo_conformance.suite`; this module adds them to the
session's collection, next to whatever else pytest collects.
"""

from __future__ import annotations

import importlib
import inspect
from collections.abc import Generator, Mapping
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

from snodo.api import CoderSpec, ValidatorSpec
from snodo.testing import PluginError, PluginHost, get_plugin_manager

from ._support import load_config, once
from .cases import FixAttempt, ValidatorCase
from .contracts import bare
from .defaults import FAILING_CASE, FIX_ATTEMPT, HOSTILE_TASK, PASSING_CASE
from .report import note_outcome, write_report

SUITE_MODULE = "snodo_conformance.suite"
KIT_NODE = "snodo_conformance"
CLASSES = {"coder": "CoderContract", "validator": "ValidatorContract"}
XFAIL_INI = "snodo_conformance_xfail"

DEFAULT_CODER_TASK = """\
Add a Python module `greeting.py` with a function `greet()` that returns "hello", and a
test for it in `tests/test_greeting.py`.

```diff
--- /dev/null
+++ b/greeting.py
@@ -0,0 +1,2 @@
+def greet() -> str:
+    return "hello"
--- /dev/null
+++ b/tests/test_greeting.py
@@ -0,0 +1,5 @@
+from greeting import greet
+
+
+def test_greet() -> None:
+    assert greet() == "hello"
```
"""

_PROBING = pytest.StashKey[bool]()


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("snodo-conformance", "snodo conformance kit (opt-in: -p snodo_conformance.plugin)")
    group.addoption(
        "--snodo-coder",
        metavar="NAME",
        default=None,
        help="check the installed coder NAME, found through the `snodo` entry points",
    )
    group.addoption(
        "--snodo-validator",
        metavar="NAME",
        default=None,
        help="check the installed validator type NAME, found through the `snodo` entry points",
    )
    group.addoption(
        "--snodo-coder-config",
        metavar="JSON|FILE",
        default=None,
        help="coder_config for the coder under test: inline JSON or a JSON file",
    )
    group.addoption(
        "--snodo-validator-config",
        metavar="JSON|FILE",
        default=None,
        help='the validator under test\'s settings: {"tooling": {...}, "model": ..., "criteria": [...]}, '
        "inline or a JSON file",
    )
    group.addoption(
        "--snodo-xfail",
        metavar="TEST",
        action="append",
        default=[],
        help="a kit test this plugin is known to fail (strict xfail); repeatable",
    )
    group.addoption(
        "--snodo-report",
        metavar="PATH",
        default=None,
        help="write a JSON conformance report (kit version, plugin, distribution, each contract's outcome) to PATH",
    )
    parser.addini(
        XFAIL_INI,
        type="linelist",
        default=[],
        help="kit tests the plugin under test is known to fail (strict xfail), one per line",
    )


def pytest_report_header(config: pytest.Config) -> list[str]:
    targets = [f"{kind} {config.getoption(f'snodo_{kind}')!r}" for kind in CLASSES if config.getoption(f"snodo_{kind}")]
    return [f"snodo conformance kit: {', '.join(targets) or 'targets from conftest.py fixtures'}"]


# ------------------------------------------------------------------------ collection


class ConformanceKit(pytest.Module):
    """The kit's suite module, collected wherever pytest runs (not from the file system walk).

    The suite is imported by its package name rather than by path, so an installed wheel and
    an editable checkout give the same module and node ids (``snodo_conformance::...``).
    """

    def _getobj(self) -> ModuleType:
        return importlib.import_module(SUITE_MODULE)

    def classnamefilter(self, name: str) -> bool:
        return name in _wanted_classes(self.config)

    def funcnamefilter(self, name: str) -> bool:
        return False

    def istestclass(self, obj: object, name: str) -> bool:
        return inspect.isclass(obj) and self.classnamefilter(name)


class ContractClass(pytest.Class):
    """A contract class: its ``test_*`` methods are the tests, whatever ``python_functions`` says."""

    def funcnamefilter(self, name: str) -> bool:
        return name.startswith("test_")


def _wanted_classes(config: pytest.Config) -> set[str]:
    """The coder contracts, the validator contracts, or both when no name was given on the
    command line (then the fixtures tell what is under test)."""
    named = {kind for kind in CLASSES if config.getoption(f"snodo_{kind}")}
    return {CLASSES[kind] for kind in (named or CLASSES)}


@pytest.hookimpl(wrapper=True)
def pytest_make_collect_report(
    collector: pytest.Collector,
) -> Generator[None, pytest.CollectReport, pytest.CollectReport]:
    report = yield
    if isinstance(collector, pytest.Session) and report.passed:
        suite = importlib.import_module(SUITE_MODULE)
        path = Path(inspect.getfile(suite))
        report.result.append(ConformanceKit.from_parent(collector, path=path, name=KIT_NODE, nodeid=KIT_NODE))
    return report


@pytest.hookimpl(tryfirst=True)
def pytest_pycollect_makeitem(collector: pytest.Collector, name: str, obj: object) -> Any:
    if isinstance(collector, ConformanceKit) and inspect.isclass(obj) and collector.classnamefilter(name):
        return ContractClass.from_parent(collector, name=name, obj=obj)
    return None


def _kit_items(items: list[pytest.Item]) -> list[pytest.Item]:
    return [item for item in items if any(isinstance(node, ConformanceKit) for node in item.listchain())]


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Turn the listed known failures into strict xfails; a name matching no kit test is an error."""
    listed = [*config.getoption("snodo_xfail"), *config.getini(XFAIL_INI)]
    if not listed:
        return
    suite = importlib.import_module(SUITE_MODULE)
    known: set[str] = set(suite.CONTRACTS)
    unknown = [name for name in listed if bare(name) not in known]
    if unknown:
        raise pytest.UsageError(
            f"--snodo-xfail / {XFAIL_INI}: no conformance test named {', '.join(map(repr, unknown))}; "
            f"the kit's tests are: {', '.join(sorted(known))}"
        )
    safety = sorted({bare(name) for name in listed} & suite.SAFETY_CONTRACTS)
    if safety:
        raise pytest.UsageError(
            f"--snodo-xfail / {XFAIL_INI}: {', '.join(safety)} cannot be a known failure: it is a safety "
            "contract, protecting the users of your plugin (see docs/conformance.md)"
        )
    for item in _kit_items(items):
        cls = item.parent.name if item.parent is not None else ""
        names = {
            item.name,
            getattr(item, "originalname", item.name),
            f"{cls}::{item.name}",
            f"{cls}::{getattr(item, 'originalname', item.name)}",
        }
        if names & set(listed):
            item.add_marker(
                pytest.mark.xfail(
                    strict=True, reason="listed as a known failure of the plugin under test (--snodo-xfail)"
                )
            )


def _is_safety_contract(item: pytest.Item) -> bool:
    if not any(isinstance(node, ConformanceKit) for node in item.listchain()):
        return False
    suite = importlib.import_module(SUITE_MODULE)
    return getattr(item, "originalname", item.name) in suite.SAFETY_CONTRACTS


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> Generator[None, Any, Any]:
    """A safety contract that was xfailed anyway (a marker, ``pytest.xfail``) fails instead."""
    report = yield
    if hasattr(report, "wasxfail") and _is_safety_contract(item):
        reason = report.wasxfail
        del report.wasxfail
        report.outcome = "failed"
        report.longrepr = (
            f"{item.name} is a safety contract of the snodo conformance kit and cannot be xfailed "
            f"(xfail reason: {reason or 'none given'}); its outcome stands as a failure"
        )
    return report


# ----------------------------------------------------------------------------- report


def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    """Keep each kit test's outcome and why, for ``--snodo-report``."""
    config = _CONFIG.get("config")
    if config is not None and report.nodeid.startswith(f"{KIT_NODE}::"):
        note_outcome(config, report)


_CONFIG: dict[str, pytest.Config] = {}


def pytest_configure(config: pytest.Config) -> None:
    _CONFIG["config"] = config


def pytest_unconfigure(config: pytest.Config) -> None:
    if _CONFIG.get("config") is config:
        del _CONFIG["config"]


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    path = session.config.getoption("snodo_report")
    if path:
        write_report(session.config, Path(path), exitstatus, CLASSES)


# -------------------------------------------------------------------------- fixtures


def _not_configured(request: pytest.FixtureRequest, kind: str) -> Exception:
    """Skip this kind when the other one is under test; otherwise say exactly what to do."""
    other = "validator" if kind == "coder" else "coder"
    message = (
        f"snodo conformance kit: no {kind} to check. Pass --snodo-{kind} NAME (an installed {kind}, "
        f"found through the `snodo` entry points) or override the `snodo_{kind}_spec` fixture in your "
        f"conftest.py. (--snodo-{other} NAME / `snodo_{other}_spec` check a {other}.)"
    )
    if request.node.stash.get(_PROBING, False):
        return NotImplementedError(message)
    request.node.stash[_PROBING] = True
    try:
        request.getfixturevalue(f"snodo_{other}_spec")
    except NotImplementedError:
        other_configured = False
    except Exception:  # an override that fails is still an override: its own tests report it
        other_configured = True
    else:
        other_configured = True
    finally:
        del request.node.stash[_PROBING]
    if other_configured:
        pytest.skip(f"no {kind} under test: pass --snodo-{kind} NAME or override `snodo_{kind}_spec`")
    return NotImplementedError(message)


def _resolve(host: PluginHost, kind: str, name: str) -> Any:
    try:
        return host.coder(name) if kind == "coder" else host.validator(name)
    except PluginError as exc:
        problem = str(exc)
    failures = "".join(f"\n  - {who}: {error}" for who, error in host.failures())
    pytest.fail(
        f'{kind} {name!r} breaks the contract "registered through the `snodo` entry points": {problem}'
        + (f"\nplugins that failed to load:{failures}" if failures else ""),
        pytrace=False,
    )


def _config(request: pytest.FixtureRequest, option: str) -> dict[str, Any]:
    try:
        raw: str | None = request.config.getoption(option.replace("-", "_"))
        return load_config(raw, f"--{option}")
    except ValueError as exc:
        raise pytest.UsageError(str(exc)) from None


@pytest.fixture(scope="session")
def snodo_host() -> PluginHost:
    """The plugin host the kit checks against: every ``snodo`` entry point, as the engine loads them."""
    return get_plugin_manager()


@pytest.fixture
def snodo_coder_spec(request: pytest.FixtureRequest, snodo_host: PluginHost) -> CoderSpec:
    """The coder under test. Override it in your conftest.py, or pass ``--snodo-coder NAME``."""
    name = request.config.getoption("snodo_coder")
    if name is None:
        raise _not_configured(request, "coder")
    spec: CoderSpec = once(request, f"coder {name!r}", lambda: _resolve(snodo_host, "coder", name))
    return spec


@pytest.fixture
def snodo_coder_config(request: pytest.FixtureRequest) -> Mapping[str, Any]:
    """The mode's ``coder_config`` the coder is run with (``--snodo-coder-config``; default empty)."""
    return _config(request, "snodo-coder-config")


@pytest.fixture
def snodo_coder_task() -> str:
    """The simple task the coder is given: prose plus the same change as a ```diff block."""
    return DEFAULT_CODER_TASK


@pytest.fixture
def snodo_validator_spec(request: pytest.FixtureRequest, snodo_host: PluginHost) -> ValidatorSpec:
    """The validator type under test. Override it in your conftest.py, or pass ``--snodo-validator NAME``."""
    name = request.config.getoption("snodo_validator")
    if name is None:
        raise _not_configured(request, "validator")
    spec: ValidatorSpec = once(request, f"validator {name!r}", lambda: _resolve(snodo_host, "validator", name))
    return spec


@pytest.fixture
def snodo_validator_config(request: pytest.FixtureRequest) -> Mapping[str, Any]:
    """The validator's protocol settings: ``tooling``, ``model``, ``criteria`` (``--snodo-validator-config``)."""
    return _config(request, "snodo-validator-config")


@pytest.fixture
def snodo_hostile_task() -> str:
    """The task asking the coder to write ``.snodo/``, ``.git/hooks``, ``../``, a protected path."""
    return HOSTILE_TASK


@pytest.fixture
def snodo_fix_attempt() -> FixAttempt:
    """The recovery attempt: ``attempt`` and the ``findings`` the coder gets on a retry."""
    return FIX_ATTEMPT


@pytest.fixture
def snodo_validator_passing_case() -> ValidatorCase:
    """A project and task the validator is asked about in ordinary runs (default: a small
    passing Python project)."""
    return PASSING_CASE


@pytest.fixture
def snodo_validator_failing_case() -> ValidatorCase:
    """A project and task the validator should fail (the severity-cap contract lowers its verdict)."""
    return FAILING_CASE
