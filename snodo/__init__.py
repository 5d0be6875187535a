"""snodo: a governance engine for AI-assisted software development."""

from __future__ import annotations

#: The distribution on the package index (``pip install snodo-governance``): the index's
#: ``snodo`` is an unrelated project. The import package and the command are ``snodo``.
DISTRIBUTION = "snodo-governance"


def __getattr__(name: str) -> str:
    # ``__version__`` from the installed metadata, read lazily: only --version pays for importlib.metadata
    if name == "__version__":
        from importlib.metadata import PackageNotFoundError, version  # noqa: PLC0415 only --version reads the installed metadata

        try:
            return version(DISTRIBUTION)
        except PackageNotFoundError:  # pragma: no cover - a source tree that was never installed
            return "0+unknown"
    raise AttributeError(f"module 'snodo' has no attribute {name!r}")
