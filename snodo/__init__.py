"""snodo: a governance engine for AI-assisted software development."""

__version__ = "1!0.2.0"
