"""The agent's tool surface over a project: files and git, every mutation behind one
:class:`PathGuard` (INV2, ADR 026); the engine's own state writes never use it.
"""

from snodo.rules.guard import PathGuard
from snodo.workspace.files import MAX_READ_BYTES, Workspace
from snodo.workspace.git import Git

__all__ = ["MAX_READ_BYTES", "Git", "PathGuard", "Workspace"]
