"""The agent's tool surface over a project: files, git and tests, all behind one guard.

Every mutation an agent can request goes through :class:`PathGuard` (INV2, ADR 026); the
engine's own state writes do not use this package at all.
"""

from snodo.rules.guard import PathGuard
from snodo.workspace.files import MAX_READ_BYTES, Workspace
from snodo.workspace.git import Git
from snodo.workspace.testrun import TestRunResult, run_tests

__all__ = ["MAX_READ_BYTES", "Git", "PathGuard", "TestRunResult", "Workspace", "run_tests"]
