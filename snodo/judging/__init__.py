"""Judging a change by its tests: per test, against the base, in copies from git's objects
(docs/judging.md); validators reach :func:`judge_change` through :func:`snodo.api.judge_tests`."""

from snodo.judging.judge import Judgement, judge_change
from snodo.judging.request import judge_tests

__all__ = ["Judgement", "judge_change", "judge_tests"]
