"""The user's audit key pair, ``$SNODO_HOME/keys/audit_ed25519{,.pub}`` (private: 32 raw bytes,
0600). Unlike the decision key, every snodo process of the user signs with it, the MCP server
included: a signed line was written by snodo as this user, outside the agents' confinement."""

from __future__ import annotations

import functools
from pathlib import Path

from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey, Ed25519PublicKey

from snodo.base.errors import StateError
from snodo.state.home import keys_dir
from snodo.state.keys import ensure_pair, load_public_key_file, public_key_fingerprint, read_secret

_RAW_KEY_BYTES = 32
#: What a new pair costs, said when half of the old one is missing.
_LOST = "logs signed with the old pair then verify only with its public key: `snodo audit verify --key`"


def audit_key_paths(home: Path) -> tuple[Path, Path]:
    directory = keys_dir(home)
    return directory / "audit_ed25519", directory / "audit_ed25519.pub"


def audit_signing_key(home: Path) -> Ed25519PrivateKey:
    return signing_key_and_fingerprint(home)[0]


@functools.cache  # a failure is not cached: it is raised again, and retried, next time
def signing_key_and_fingerprint(home: Path) -> tuple[Ed25519PrivateKey, str]:
    """The audit key (created on first use) and its public fingerprint."""
    private, public = audit_key_paths(home)
    if not (private.exists() and public.exists()):
        ensure_pair(private, public, "audit", raw=True, lost=_LOST)
    raw = read_secret(private)
    if len(raw) != _RAW_KEY_BYTES:
        raise StateError(f"{private} is not an audit key ({len(raw)} bytes, expected {_RAW_KEY_BYTES})")
    key = Ed25519PrivateKey.from_private_bytes(raw)
    fingerprint = public_key_fingerprint(key.public_key())
    if fingerprint != public_key_fingerprint(load_public_key_file(public)):
        raise StateError(f"the audit key pair under {private.parent} does not match: {public} is not its public key")
    return key, fingerprint


def audit_public_key(home: Path) -> Ed25519PublicKey | None:
    """None if this home has never signed an audit log."""
    try:
        return load_public_key_file(audit_key_paths(home)[1])
    except FileNotFoundError:
        return None
