"""Key files under ``$SNODO_HOME/keys/``: the token key and the decision key pair, created on
first use and linked into place complete (the loser of a creation race reads the winner's key);
one readable by others, or empty, is refused rather than repaired. Only :mod:`snodo.cli.signing`
(``snodo authorize``) reads the decision private key: no agent-facing code path can sign a
decision. Public keys travel as OpenSSH lines (PEM is read too)."""

from __future__ import annotations

import binascii
import hashlib
import os
import secrets
import stat
from pathlib import Path

from cryptography.exceptions import UnsupportedAlgorithm
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey, Ed25519PublicKey

from snodo.base.errors import StateError
from snodo.state.atomic import atomic_create_bytes, file_lock, read_bytes
from snodo.state.home import keys_dir

DECISION_PRIVATE_KEY_FILE = "decision_ed25519"
DECISION_PUBLIC_KEY_FILE = "decision_ed25519.pub"
_TOKEN_KEY_BYTES = 32
#: How the blob of an ``ssh-ed25519`` line starts: the type, then the 32-byte key, each behind its length (RFC 8709).
_ED25519_BLOB = b"\x00\x00\x00\x0bssh-ed25519\x00\x00\x00\x20"

#: The key pairs this process created: the command line says a new home is a new identity.
created_here: list[Path] = []


def require_owner_only(path: Path, fd: int) -> None:
    mode = stat.S_IMODE(os.fstat(fd).st_mode)
    if mode & 0o077:
        raise StateError(
            f"{path} has mode {mode:04o}; a secret key must be readable by its owner only",
            hint=f"run: chmod 600 {path}",
        )


def read_secret(path: Path) -> bytes:
    try:
        with open(path, "rb") as handle:
            require_owner_only(path, handle.fileno())
            return handle.read()
    except OSError as exc:
        raise StateError(f"cannot read {path}: {exc.strerror or exc}") from exc


def token_key(home: Path) -> bytes:
    path = keys_dir(home) / "token.key"
    if not path.exists():
        atomic_create_bytes(path, secrets.token_bytes(_TOKEN_KEY_BYTES), mode=0o600)
    data = read_secret(path)
    if len(data) < _TOKEN_KEY_BYTES:
        raise StateError(
            f"{path} is empty or too short ({len(data)} bytes, need {_TOKEN_KEY_BYTES})",
            hint="delete it to generate a new key; tokens issued with the old key become invalid",
        )
    return data


def decision_key_paths(home: Path) -> tuple[Path, Path]:
    directory = keys_dir(home)
    return directory / DECISION_PRIVATE_KEY_FILE, directory / DECISION_PUBLIC_KEY_FILE


def ensure_pair(private: Path, public: Path, what: str, *, raw: bool = False, lost: str = "") -> None:
    """Create an Ed25519 pair if absent (the private half as PKCS8 PEM, or ``raw`` bytes).
    Half a pair is an error: a silently replaced key would invalidate what it signed."""
    with file_lock(private):
        if private.exists() != public.exists():
            missing, present = (public, private) if private.exists() else (private, public)
            raise StateError(
                f"{what} key pair is incomplete: {missing} is missing but {present} exists",
                hint="restore the missing file, or remove both to create a new pair "
                f"({lost or 'what was signed with the old pair will no longer verify'})",
            )
        if not private.exists():
            from cryptography.hazmat.primitives import serialization  # noqa: PLC0415 key serialisation only when a key file is read or written

            key = Ed25519PrivateKey.generate()
            pem = (serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption())
            atomic_create_bytes(private, key.private_bytes_raw() if raw else key.private_bytes(*pem), mode=0o600)
            atomic_create_bytes(public, openssh_public(key.public_key()).encode("ascii") + b"\n", mode=0o644)
            created_here.append(private)


def ensure_decision_keys(home: Path) -> Ed25519PublicKey:
    ensure_pair(*decision_key_paths(home), "decision")
    return load_decision_public_key(home)


def load_decision_public_key(home: Path) -> Ed25519PublicKey:
    _, path = decision_key_paths(home)
    try:
        return load_public_key_file(path)
    except FileNotFoundError as exc:
        raise StateError(
            f"no decision public key at {path}",
            hint="`snodo authorize` creates the key pair when it signs its first decision",
        ) from exc


def parse_public_key(data: bytes, source: str) -> Ed25519PublicKey:
    """From an OpenSSH line (``ssh-ed25519 AAAA... [comment]``) or PEM."""
    text = data.strip()
    if text.startswith(b"ssh-ed25519 "):  # the form snodo writes: read without the SSH module
        return _openssh_ed25519(text, source)
    from cryptography.hazmat.primitives import serialization  # noqa: PLC0415 key serialisation only when a key file is read or written

    try:
        if text.startswith(b"ssh-"):
            key: object = serialization.load_ssh_public_key(b" ".join(text.split()[:2]))
        else:
            key = serialization.load_pem_public_key(text)
    except (ValueError, UnsupportedAlgorithm, IndexError) as exc:
        raise StateError(f"{source} is not a valid public key (OpenSSH or PEM): {exc}") from exc
    if not isinstance(key, Ed25519PublicKey):
        raise StateError(f"{source} holds a {type(key).__name__}, not an Ed25519 public key")
    return key


def _openssh_ed25519(line: bytes, source: str) -> Ed25519PublicKey:
    try:
        blob = binascii.a2b_base64(line.split()[1], strict_mode=True)
        if len(blob) != len(_ED25519_BLOB) + 32 or not blob.startswith(_ED25519_BLOB):
            raise ValueError("the key data is not one ssh-ed25519 key")
    except (ValueError, IndexError, binascii.Error) as exc:
        raise StateError(f"{source} is not a valid public key (OpenSSH or PEM): {exc}") from exc
    return Ed25519PublicKey.from_public_bytes(blob[len(_ED25519_BLOB) :])


def load_public_key_file(path: Path) -> Ed25519PublicKey:
    """``FileNotFoundError`` passes through for the caller to explain."""
    return parse_public_key(read_bytes(path), str(path))


def openssh_public(key: Ed25519PublicKey) -> str:
    """``ssh-ed25519 AAAA...``, as allowed-signers lists it."""
    from cryptography.hazmat.primitives import serialization  # noqa: PLC0415 key serialisation only when a key file is read or written

    return key.public_bytes(serialization.Encoding.OpenSSH, serialization.PublicFormat.OpenSSH).decode("ascii")


def public_key_fingerprint(key: Ed25519PublicKey) -> str:
    """``sha256:<hex>`` of the raw public key."""
    return "sha256:" + hashlib.sha256(key.public_bytes_raw()).hexdigest()
