"""Evidence that leaves the machine: a signed attestation on every governed commit, stored
as a git note under ``refs/notes/snodo``, and the range check (``snodo verify``) a team's CI
or server runs before it merges (SPEC §10).

Layering: the engine and the MCP host call :mod:`snodo.evidence.attest`; everything here
uses the state layer's keys and allowed_signers parser and runs git only through
:mod:`snodo.git.runner`.
"""
