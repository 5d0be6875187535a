"""The acceptance validator: criteria from the validator and the spec, mechanical shapes
checked against a real tree, prose reported as not verified when no model judges it."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest
from snodo_plugins.validators._criteria import classify, from_spec

from snodo.api import ValidationRequest, Verdict
from snodo.plugin.host import PluginHost

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
    verdict = judge(host, vrequest(root, "acceptance", spec=SPEC, phase="pre_execute"))
    assert verdict.severity == "warn"


def test_no_criteria_at_all(host: PluginHost, project: Callable[..., Path], vrequest: Request) -> None:
    verdict = judge(host, vrequest(project({}), "acceptance", spec="add a hello module"))
    assert verdict.severity == "pass"
    assert verdict.justification == "no acceptance criteria stated; nothing to check"
