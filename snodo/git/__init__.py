"""snodo's own git: one hardened runner, pinned to the repository, with a time limit."""
