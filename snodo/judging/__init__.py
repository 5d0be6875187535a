"""Judging a change by its tests: per test, against the base, in copies from git's objects.

:func:`judge_change` is the one entry point (the pytest validator and the acceptance
criterion "tests pass" reach it through :func:`snodo.api.judge_tests`). docs/judging.md
says what it defends against and what it cannot.
"""

from snodo.judging.judge import Judgement, judge_change
from snodo.judging.request import judge_tests

__all__ = ["Judgement", "judge_change", "judge_tests"]
