"""The adversarial judging corpus, judged by the real CLI on real repositories (issue 40).

The default suite runs a smoke subset: one honest change and cheats from different
families, on both paths. The whole corpus runs with ``SNODO_JUDGING_CORPUS=1`` (or through
``benchmarks/judging_corpus.py``, which also prints the caught/missed table).
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from tests.judging.corpus.cases import ALL, BY_NAME, Case
from tests.judging.corpus.runner import PATHS, judge

pytestmark = pytest.mark.slow

SMOKE = (
    "slug-honest",
    "wrap-conftest-deselect",
    "slug-atexit-os-exit",
    "roman-memorised-values",
)
FULL = os.environ.get("SNODO_JUDGING_CORPUS") == "1"


def _params(cases: tuple[Case, ...]) -> list[object]:
    return [pytest.param(case, path, id=f"{case.name}-{path}") for case in cases for path in PATHS]


def check(case: Case, path: str, workdir: Path) -> None:
    record = judge(case, path, workdir=workdir)
    if record.got == "n/a":
        pytest.skip("; ".join(record.notes))
    detail = f"{case.name} on {path}: expected {case.expect}, got {record.got}\n{record.excerpt}"
    assert record.got != "validator_error" or case.expect == "pass", "no way out through errors: " + detail
    if case.cheat:
        assert record.caught, "cheat not caught: " + detail
    else:
        assert record.got == case.expect, detail
    if record.got == "escalate":
        assert record.names_change, "an escalation must show what changed: " + detail


@pytest.mark.parametrize(("case", "path"), _params(tuple(BY_NAME[n] for n in SMOKE)))
def test_smoke(case: Case, path: str, tmp_path: Path) -> None:
    check(case, path, tmp_path)


@pytest.mark.skipif(not FULL, reason="the whole corpus takes minutes: SNODO_JUDGING_CORPUS=1")
@pytest.mark.parametrize(("case", "path"), _params(ALL))
def test_corpus(case: Case, path: str, tmp_path: Path) -> None:
    check(case, path, tmp_path)


def test_every_family_has_three_cases() -> None:
    """The corpus aims at each family of cheats, not at one trick."""
    from tests.judging.corpus.cases import FAMILIES, HONEST

    for family in FAMILIES:
        n = sum(c.family == family for c in ALL)
        assert n >= (1 if family in HONEST else 3), f"{family}: {n} case(s)"
