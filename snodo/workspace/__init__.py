"""The agent's tool surface over a project: files and git, all behind one guard (its tests
run through :mod:`snodo.judging.testrun`).

Every mutation an agent can request goes through :class:`PathGuard` (INV2, ADR 026); the
engine's own state writes do not use this package at all.
"""

from snodo.rules.guard import PathGuard
from snodo.workspace.files import MAX_READ_BYTES, Workspace
from snodo.workspace.git import Git

__all__ = ["MAX_READ_BYTES", "Git", "PathGuard", "Workspace"]
