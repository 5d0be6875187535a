"""Running the conformance kit from inside the test suite: in-process through ``pytester``,
with plugins installed the way a third party's are (a dist-info with ``snodo`` entry points
on ``sys.path``), so the kit resolves them through the real entry points."""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path

import pytest

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")  # before anything imports litellm

# pytester drops the modules an in-process run imported first; classes re-imported by a later
# run would then differ from the ones snodo already holds (`DroppedOperation` is not
# `DroppedOperation`). Import everything the kit touches up front, litellm included (slow).
import litellm  # noqa: F401
import snodo_conformance.plugin
import snodo_conformance.suite  # noqa: F401

from snodo.plugin.host import get_plugin_manager

get_plugin_manager()  # imports snodo's core plugin and every built-in through the entry points

KIT = ("-p", "snodo_conformance.plugin", "-p", "no:cacheprovider", "-rsxX")

# litellm imports provider modules lazily on the first completion; one of them makes pydantic
# warn about a TypedDict's ReadOnly items (not ours to fix).
_LITELLM_NOISE = pytest.mark.filterwarnings("ignore:Item.*ReadOnly. qualifier:UserWarning")


def pytest_configure(config: pytest.Config) -> None:
    # `pytest_plugins` is refused in a conftest below the rootdir; register pytester directly.
    if not config.pluginmanager.has_plugin("pytester"):
        config.pluginmanager.import_plugin("pytester")
    if not config.pluginmanager.has_plugin("snodo_conformance.harness"):
        config.pluginmanager.import_plugin("snodo_conformance.harness")


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    here = Path(__file__).resolve().parent
    for item in items:
        if here in item.path.parents:
            item.add_marker(_LITELLM_NOISE)


@pytest.fixture
def kit(pytester: pytest.Pytester) -> Callable[..., pytest.RunResult]:
    """Run the kit in-process in pytester's (empty) directory with the given options."""

    def run(*args: str) -> pytest.RunResult:
        return pytester.runpytest_inprocess(*KIT, *args)

    return run


@pytest.fixture
def install_plugins(pytester: pytest.Pytester) -> Callable[[dict[str, str]], Path]:
    """``install_plugins({entry_point_name: module_source})``: one installed distribution
    ``conformance-fixtures`` whose ``snodo`` entry points name the given modules."""

    def install(plugins: dict[str, str]) -> Path:
        site = pytester.mkdir("site")
        info = site / "conformance_fixtures-1.0.dist-info"
        info.mkdir()
        (info / "METADATA").write_text("Metadata-Version: 2.1\nName: conformance-fixtures\nVersion: 1.0\n")
        lines = []
        for name, source in plugins.items():
            module = "fixture_" + name.replace("-", "_")
            (site / f"{module}.py").write_text(source)
            lines.append(f"{name} = {module}\n")
        (info / "entry_points.txt").write_text("[snodo]\n" + "".join(lines))
        pytester.syspathinsert(site)
        return site

    return install
