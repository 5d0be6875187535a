"""The protocol validator's deterministic part: clause-opening verbs -> capabilities, checked
against the current mode, naming the modes that could do the task instead."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest
from snodo_plugins.validators.protocol_fit import intents

from snodo.api import ValidationRequest, Verdict
from snodo.plugin.host import PluginHost
from snodo.protocol.models import Mode

Request = Callable[..., ValidationRequest]
RELEASE = Mode(mode_id="release", tools=("read", "merge"))
LEAD = Mode(mode_id="lead", tools=("review", "approve"))


def judge(host: PluginHost, request: ValidationRequest) -> Verdict:
    verdict = host.validate(request)
    assert verdict is not None
    return verdict


@pytest.mark.parametrize(
    ("spec", "expected"),
    [
        ("Add a hello module and commit it.", {"edit": "add", "commit": "commit"}),
        (
            "Please review the diff, then approve and merge the branch",
            {"review": "review", "approve": "approve", "merge": "merge"},
        ),
        ("# Epic 7\n- decompose it into tasks", {"plan": "decompose"}),
        ("Run the tests", {"test": "run the tests"}),
        ("Fix the commit message parser", {"edit": "fix"}),
        ("Explain `merge()` in utils.py", {"read": "explain"}),
        ("## Acceptance criteria\n- tests pass\n- file `a.py` exists", {}),
    ],
)
def test_intent_table(spec: str, expected: dict[str, str]) -> None:
    assert intents(spec) == expected


def test_task_the_mode_cannot_do_is_a_blocker_naming_who_can(
    host: PluginHost, project: Callable[..., Path], vrequest: Request
) -> None:
    request = vrequest(
        project({}),
        "protocol",
        spec="Merge branch feature/x into main",
        tools=("read", "edit"),
        other_modes=(RELEASE, LEAD),
        phase="pre_execute",
    )
    verdict = judge(host, request)
    assert verdict.severity == "blocker"
    assert "'merge'" in verdict.justification and "mode 'dev' lacks" in verdict.justification
    assert "modes that have it: release" in verdict.justification
    assert verdict.details["missing"] == ["merge"]


def test_no_mode_has_it(host: PluginHost, project: Callable[..., Path], vrequest: Request) -> None:
    verdict = judge(host, vrequest(project({}), "protocol", spec="plan the migration", tools=("edit",)))
    assert verdict.severity == "blocker"
    assert "no mode of this protocol has it" in verdict.justification


def test_fitting_task_passes(host: PluginHost, project: Callable[..., Path], vrequest: Request) -> None:
    verdict = judge(host, vrequest(project({}), "protocol", spec="add a hello module", tools=("edit",)))
    assert verdict.severity == "pass"
    assert "edit ('add')" in verdict.justification


def test_no_capability_signals_passes_with_a_note(
    host: PluginHost, project: Callable[..., Path], vrequest: Request
) -> None:
    verdict = judge(host, vrequest(project({}), "protocol", spec="The greeting should be friendlier."))
    assert verdict.severity == "pass"
    assert "no capability signals" in verdict.justification


def test_tools_cover_non_exclusive_capabilities_only(
    host: PluginHost, project: Callable[..., Path], vrequest: Request
) -> None:
    root = project({})
    # `approve` grants stage_files + commit, so a commit fits the lead mode ...
    assert judge(host, vrequest(root, "protocol", spec="commit the work", tools=("approve",))).severity == "pass"
    # ... `edit` grants read_file/list_files, so reading fits an editing mode ...
    assert judge(host, vrequest(root, "protocol", spec="read the docs", tools=("edit",))).severity == "pass"
    # ... but the same tools never stand in for an exclusive capability.
    verdict = judge(host, vrequest(root, "protocol", spec="approve the change", tools=("commit",), other_modes=(LEAD,)))
    assert verdict.severity == "blocker" and "modes that have it: lead" in verdict.justification
