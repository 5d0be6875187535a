"""Evidence that leaves the machine: signed attestations on governed commits as git notes
(``refs/notes/snodo``) and the range check ``snodo verify`` (SPEC §10)."""
