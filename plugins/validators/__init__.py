"""Built-in validator types: ``pytest``, ``acceptance``, ``protocol`` and ``llm``."""
