"""snodo: a governance engine for AI-assisted software development."""

__version__ = "0.1.0"
