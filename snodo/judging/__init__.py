"""Judging a change by its tests, per test against the base, in copies from git's objects (docs/judging.md)."""

from snodo.judging.judge import Judgement, judge_change
from snodo.judging.request import judge_tests

__all__ = ["Judgement", "judge_change", "judge_tests"]
