"""snodo: a governance engine for AI-assisted software development."""

from importlib.metadata import PackageNotFoundError, version

try:
    __version__ = version("snodo")  # from the installed metadata, so it never drifts from pyproject.toml
except PackageNotFoundError:  # pragma: no cover - a source tree that was never installed
    __version__ = "0+unknown"
