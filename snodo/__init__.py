"""snodo: a governance engine for AI-assisted software development."""

from importlib.metadata import version

__version__ = version("snodo")  # from the installed metadata, so it never drifts from pyproject.toml
