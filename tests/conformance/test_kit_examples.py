"""The kit against the two third-party-style packages under examples/, registered through a
dist-info with their entry points (tox's ``examples`` env builds and installs the real
wheels and runs the same checks plus each package's own tests)."""

from __future__ import annotations

import json
import shutil
from collections.abc import Callable
from pathlib import Path

import pytest

Kit = Callable[..., pytest.RunResult]
EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


@pytest.fixture
def examples_installed(pytester: pytest.Pytester) -> None:
    site = pytester.mkdir("examples-site")
    info = site / "snodo_examples-0.1.0.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: snodo-examples\nVersion: 0.1.0\n")
    (info / "entry_points.txt").write_text(
        "[snodo]\npatch = snodo_patch_coder\nforbidden-imports = snodo_forbidden_imports\n"
    )
    for package, module in (
        ("snodo-patch-coder", "snodo_patch_coder"),
        ("snodo-forbidden-imports", "snodo_forbidden_imports"),
    ):
        # a copy of the package alone: no build/ or *.egg-info a local build may have left
        shutil.copytree(
            EXAMPLES / package / "src" / module, site / module, ignore=shutil.ignore_patterns("__pycache__")
        )
    pytester.syspathinsert(site)


@pytest.mark.usefixtures("examples_installed")
def test_patch_coder_example_passes_the_kit(kit: Kit) -> None:
    result = kit("--snodo-coder", "patch", "-rsP")
    result.assert_outcomes(passed=10, skipped=4)
    # the kit's hostile task is a diff touching .snodo/, .git/, secrets/ and ../: all dropped
    result.stdout.fnmatch_lines(
        [
            "*hostile task: proposed 5 operation(s); the engine's filter dropped .snodo/hijack.yml*",
        ]
    )
    assert "dropped notes.txt" not in result.stdout.str()


@pytest.mark.usefixtures("examples_installed")
def test_forbidden_imports_example_passes_the_kit(kit: Kit) -> None:
    config = json.dumps({"tooling": {"forbidden": ["subprocess"]}})
    result = kit("--snodo-validator", "forbidden-imports", f"--snodo-validator-config={config}")
    result.assert_outcomes(passed=10, skipped=1)


@pytest.mark.usefixtures("examples_installed")
def test_forbidden_imports_without_its_tooling_is_told_how_to_configure(kit: Kit) -> None:
    result = kit("--snodo-validator", "forbidden-imports", "-k", "verdict")
    result.assert_outcomes(failed=2, deselected=9)
    result.stdout.fnmatch_lines(
        [
            "*on the kit's ordinary pre_execute request it raised ValidatorFault: *tooling.forbidden must be a non-empty*",
            "*If it needs settings (a model, tooling), pass them with --snodo-validator-config=JSON|FILE*",
        ]
    )
