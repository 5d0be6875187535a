"""Built-in coders: ``mock`` (deterministic, offline), ``litellm`` and ``opencode``."""
