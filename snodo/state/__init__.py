"""Governance state: what snodo remembers between commands and processes. Nothing is
re-exported here, so importing one piece does not load the others (JWT and SQLite, Ed25519)."""
