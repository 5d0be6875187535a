"""The user's audit key pair, ``$SNODO_HOME/keys/audit_ed25519{,.pub}``.

Unlike the decision key (read only by ``snodo authorize``), the audit key signs the
checkpoints every snodo process of the user appends, the MCP server included: it proves
that a line was written by snodo running as this user, outside the confinement that keeps
agents away from the home. The private half is kept as its 32 raw bytes (mode 0600), the
public half as one OpenSSH line, the form an exported log is checked with.
"""

from __future__ import annotations

import os
from pathlib import Path

from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey, Ed25519PublicKey

from snodo.base.errors import StateError
from snodo.state.atomic import atomic_create_bytes, file_lock
from snodo.state.home import keys_dir
from snodo.state.keys import (
    created_here,
    load_public_key_file,
    openssh_public,
    public_key_fingerprint,
    require_owner_only,
)

AUDIT_PRIVATE_KEY_FILE = "audit_ed25519"
AUDIT_PUBLIC_KEY_FILE = "audit_ed25519.pub"
_RAW_KEY_BYTES = 32

_LOADED: dict[Path, Ed25519PrivateKey] = {}
#: the same by home, so that the signing of every append costs no path work
_BY_HOME: dict[Path, tuple[Ed25519PrivateKey, str]] = {}


def audit_key_paths(home: Path) -> tuple[Path, Path]:
    """``(private, public)`` paths of the audit key pair."""
    directory = keys_dir(home)
    return directory / AUDIT_PRIVATE_KEY_FILE, directory / AUDIT_PUBLIC_KEY_FILE


def _create(private: Path, public: Path) -> None:
    with file_lock(private):
        if private.exists() != public.exists():
            missing, present = (public, private) if private.exists() else (private, public)
            raise StateError(
                f"audit key pair is incomplete: {missing} is missing but {present} exists",
                hint="restore the missing file, or remove both to create a new pair (logs signed "
                "with the old pair then verify only with its public key: `snodo audit verify --key`)",
            )
        if not private.exists():
            key = Ed25519PrivateKey.generate()
            from cryptography.hazmat.primitives import serialization  # noqa: PLC0415 key serialisation only when a key file is read or written

            raw = key.private_bytes(
                serialization.Encoding.Raw, serialization.PrivateFormat.Raw, serialization.NoEncryption()
            )
            atomic_create_bytes(private, raw, mode=0o600)
            atomic_create_bytes(public, openssh_public(key.public_key()).encode("ascii") + b"\n", mode=0o644)
            created_here.append(private)


def audit_signing_key(home: Path) -> Ed25519PrivateKey:
    """The user's audit key, created on first use and read once per process."""
    return signing_key_and_fingerprint(home)[0]


def signing_key_and_fingerprint(home: Path) -> tuple[Ed25519PrivateKey, str]:
    """The user's audit key and its public fingerprint, read once per process and home."""
    known = _BY_HOME.get(home)
    if known is not None:
        return known
    key = _load(home)
    _BY_HOME[home] = known = key, public_key_fingerprint(key.public_key())
    return known


def _load(home: Path) -> Ed25519PrivateKey:
    private, public = audit_key_paths(home)
    cached = _LOADED.get(private)
    if cached is not None:
        return cached
    if not (private.exists() and public.exists()):
        _create(private, public)
    try:
        fd = os.open(private, os.O_RDONLY)
        try:
            require_owner_only(private, fd)
            raw = os.read(fd, _RAW_KEY_BYTES + 1)
        finally:
            os.close(fd)
    except OSError as exc:
        raise StateError(f"cannot read {private}: {exc.strerror or exc}") from exc
    if len(raw) != _RAW_KEY_BYTES:
        raise StateError(f"{private} is not an audit key ({len(raw)} bytes, expected {_RAW_KEY_BYTES})")
    key = Ed25519PrivateKey.from_private_bytes(raw)
    if public_key_fingerprint(key.public_key()) != public_key_fingerprint(load_public_key_file(public)):
        raise StateError(f"the audit key pair under {private.parent} does not match: {public} is not its public key")
    _LOADED[private] = key
    return key


def audit_public_key(home: Path) -> Ed25519PublicKey | None:
    """The user's audit public key, or None if this home has never signed an audit log."""
    _, public = audit_key_paths(home)
    try:
        return load_public_key_file(public)
    except FileNotFoundError:
        return None
