"""Governance state: what snodo remembers between commands and processes.

- :mod:`~snodo.state.atomic` — atomic writes, strict reads, cross-process locks
- :mod:`~snodo.state.home` — ``$SNODO_HOME`` and a project's ``.snodo/``
- :mod:`~snodo.state.keys` — the token key and the decision public key
- :mod:`~snodo.state.audit` — the hash-chained audit log
- :mod:`~snodo.state.tokens` — single-use validation tokens
- :mod:`~snodo.state.sessions` — sessions, pending decisions, project state
- :mod:`~snodo.state.decisions` — signed human decisions

Nothing is re-exported here, so importing one piece does not load the others (the token
store pulls in JWT and SQLite, the decisions Ed25519). The decision *private* key is
read only by :mod:`snodo.cli.signing`, which nothing in this package imports.
"""
