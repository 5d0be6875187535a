"""The acceptance validator: criteria from the validator and the spec, mechanical shapes
checked against a real tree, prose reported as not verified when no model judges it (once a
task: after the work, when an acceptance validator judges it then)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import attrs
import pytest
from snodo_plugins.validators._criteria import classify, from_spec

from snodo.api import ValidationRequest, Verdict
from snodo.plugin.host import PluginHost
from snodo.protocol.models import Validator

Request = Callable[..., ValidationRequest]

SPEC = """# Add a hello module

Some context that is not a criterion.

## Acceptance criteria
- file `hello.py` exists
- [ ] function `hello` is defined
- tests pass
- the greeting is friendly
  and polite

## Notes
- not a criterion
"""
TREE = {
    "hello.py": "def hello():\n    return 'hi'\n",
    "tests/test_hello.py": "import hello\n\n\ndef test_hello():\n    assert hello.hello() == 'hi'\n",
}


def judge(host: PluginHost, request: ValidationRequest) -> Verdict:
    verdict = host.validate(request)
    assert verdict is not None
    return verdict


def statuses(verdict: Verdict) -> dict[str, str]:
    return {row["criterion"]: row["status"] for row in verdict.details["criteria"]}


def test_spec_sections_are_found() -> None:
    assert from_spec(SPEC) == [
        "file `hello.py` exists",
        "function `hello` is defined",
        "tests pass",
        "the greeting is friendly and polite",
    ]
    assert from_spec("Do it.\n\nDone when:\n* `a.txt` exists\n1. tests pass\nThanks") == [
        "`a.txt` exists",
        "tests pass",
    ]
    assert from_spec("**Acceptance criteria:** `x.py` exists") == ["`x.py` exists"]
    assert from_spec("add a module\n- tests pass") == []


@pytest.mark.parametrize(
    ("text", "kind", "target"),
    [
        ("file `src/a.py` exists.", "exists", "src/a.py"),
        ("`tests/test_x.py` exists", "exists", "tests/test_x.py"),
        ("`old.py` is removed", "absent", "old.py"),
        ("function `greet` is defined", "defined", "greet"),
        ("`VERSION` is defined in `pkg/__init__.py`", "defined", "VERSION"),
        ("`hello.py` defines `hello()`", "defined", "hello"),
        ("class `Greeter` exists", "defined", "Greeter"),
        ("All tests pass", "tests", ""),
        ("the test suite passes", "tests", ""),
    ],
)
def test_checkable_shapes(text: str, kind: str, target: str) -> None:
    check = classify(text)
    assert check is not None and (check.kind, check.target) == (kind, target)


@pytest.mark.parametrize("text", ["the code is readable", "file `a.py` exists and tests pass", "tests pass quickly"])
def test_prose_and_compound_sentences_are_not_half_checked(text: str) -> None:
    assert classify(text) is None


def test_post_execute_all_checkable_met(host: PluginHost, project: Callable[..., Path], vrequest: Request) -> None:
    root = project(TREE)
    spec = SPEC.replace("- the greeting is friendly\n  and polite\n", "")
    verdict = judge(host, vrequest(root, "acceptance", spec=spec, criteria=("`tests/test_hello.py` exists",)))
    assert verdict.severity == "pass", verdict.justification
    assert set(statuses(verdict).values()) == {"met"}
    assert verdict.details["criteria"][0]["source"] == "validator"
    assert "4 of 4 criteria met" in verdict.justification


def test_post_execute_failure_is_a_blocker(host: PluginHost, project: Callable[..., Path], vrequest: Request) -> None:
    root = project({"tests/test_hello.py": "def test_x():\n    assert False\n"})
    verdict = judge(host, vrequest(root, "acceptance", spec=SPEC))
    assert verdict.severity == "blocker"
    assert statuses(verdict) == {
        "file `hello.py` exists": "failed",
        "function `hello` is defined": "failed",
        "tests pass": "failed",
        "the greeting is friendly and polite": "not verified",
    }
    assert "hello.py not found" in verdict.justification


def test_prose_without_a_model_is_not_verified_so_warn(
    host: PluginHost, project: Callable[..., Path], vrequest: Request
) -> None:
    verdict = judge(host, vrequest(project(TREE), "acceptance", spec=SPEC))
    assert verdict.severity == "warn"
    assert statuses(verdict)["the greeting is friendly and polite"] == "not verified"
    assert "no model configured" in verdict.justification


def test_pre_execute_judges_checkability_only(
    host: PluginHost, project: Callable[..., Path], vrequest: Request
) -> None:
    root = project({})
    only_checkable = SPEC.replace("- the greeting is friendly\n  and polite\n", "")
    verdict = judge(host, vrequest(root, "acceptance", spec=only_checkable, phase="pre_execute"))
    assert verdict.severity == "pass"
    assert set(statuses(verdict).values()) == {"checkable"}
    # no acceptance validator judges the work after it: before the work is the one chance a person sees it
    verdict = judge(host, vrequest(root, "acceptance", spec=SPEC, phase="pre_execute"))
    assert verdict.severity == "warn"
    assert statuses(verdict)["the greeting is friendly and polite"] == "not verified"


AFTER = Validator(validator_id="after", validator_type="acceptance", evaluation_phase="post_execute")


def test_pre_execute_leaves_prose_for_the_person_after_the_work(
    host: PluginHost, project: Callable[..., Path], vrequest: Request
) -> None:
    """With no model, a prose criterion is one question for a person, after the work: before
    it, the verdict says the criterion was not judged, and adds nothing to the severity."""
    root = project({})
    verdict = judge(host, vrequest(root, "acceptance", spec=SPEC, phase="pre_execute", others=(AFTER,)))
    assert verdict.severity == "pass", verdict.justification
    assert statuses(verdict)["the greeting is friendly and polite"] == "not judged before the work"
    assert verdict.justification == (
        "3 of 4 criteria checkable. not judged before the work: the greeting is friendly and polite "
        "(prose criterion and no model configured: a person judges it after the work)"
    )
    prose_only = "add a hello module\n\nAcceptance criteria:\n- the greeting is friendly\n"
    verdict = judge(host, vrequest(root, "acceptance", spec=prose_only, phase="pre_execute", others=(AFTER,)))
    assert verdict.severity == "pass"
    assert verdict.justification.startswith("0 of 1 criteria checkable. not judged before the work: ")
    # after the work, the same criterion is the person's question
    verdict = judge(host, vrequest(project(TREE, name="done"), "acceptance", spec=SPEC))
    assert verdict.severity == "warn"
    assert statuses(verdict)["the greeting is friendly and polite"] == "not verified"


def test_pre_execute_asks_about_prose_no_later_validator_sees(
    host: PluginHost, project: Callable[..., Path], vrequest: Request
) -> None:
    """A validator's own prose criterion that the acceptance validator after the work does not
    carry would never reach a person after: before the work is its one chance."""
    own = ("the names are clear",)
    request = vrequest(project({}), "acceptance", phase="pre_execute", criteria=own, others=(AFTER,))
    verdict = judge(host, request)
    assert verdict.severity == "warn" and statuses(verdict) == {"the names are clear": "not verified"}
    carried = attrs.evolve(AFTER, criteria=(" the names are clear",))
    request = vrequest(project({}, name="again"), "acceptance", phase="pre_execute", criteria=own, others=(carried,))
    assert statuses(judge(host, request)) == {"the names are clear": "not judged before the work"}


def test_no_criteria_at_all(host: PluginHost, project: Callable[..., Path], vrequest: Request) -> None:
    verdict = judge(host, vrequest(project({}), "acceptance", spec="add a hello module"))
    assert verdict.severity == "pass"
    assert verdict.justification == "no acceptance criteria stated; nothing to check"
