"""The only code that reads the decision private key, imported by a person's commands alone: no
code path of the agents' tool surface can sign (docs/security.md)."""

from __future__ import annotations

import base64
import hashlib
from pathlib import Path

import click
from attrs import evolve
from cryptography.exceptions import UnsupportedAlgorithm
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey, Ed25519PublicKey

from snodo.base.errors import DecisionError, StateError
from snodo.state.atomic import atomic_write_bytes
from snodo.state.decisions import DecisionRecord, check_inv3
from snodo.state.keys import decision_key_paths, ensure_decision_keys, public_key_fingerprint, read_secret
from snodo.state.sessions import PendingDecision


def load_decision_private_key(home: Path, passphrase: bytes | None = None) -> Ed25519PrivateKey:
    """The decision private key; ``passphrase`` when it is protected (``snodo keys protect``)."""
    private, _ = decision_key_paths(home)
    data = read_secret(private)
    try:
        key = serialization.load_pem_private_key(data, password=passphrase)
    except TypeError as exc:  # encrypted but no passphrase, or a passphrase for a plain key
        if passphrase is None:
            raise DecisionError(f"the decision key {private} is protected by a passphrase") from exc
        raise StateError(f"{private} is not protected by a passphrase: {exc}") from exc
    except ValueError as exc:
        if passphrase is not None and b"ENCRYPTED" in data[:64]:
            raise DecisionError(f"wrong passphrase for the decision key {private}") from None
        raise StateError(f"{private} is not a valid PEM private key: {exc}") from exc
    except UnsupportedAlgorithm as exc:
        raise StateError(f"{private} is not a valid PEM private key: {exc}") from exc
    if not isinstance(key, Ed25519PrivateKey):
        raise StateError(f"{private} holds a {type(key).__name__}, not an Ed25519 private key")
    return key


def protect_decision_key(home: Path, passphrase: bytes) -> Path:
    """Re-write the decision private key (made if absent) encrypted with ``passphrase``."""
    ensure_decision_keys(home)
    key = load_decision_private_key(home)
    private, _ = decision_key_paths(home)
    atomic_write_bytes(
        private,
        key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.BestAvailableEncryption(passphrase),
        ),
        mode=0o600,
    )
    return private


def sign_decision(
    home: Path, record: DecisionRecord, pending: PendingDecision, *, passphrase: bytes | None = None
) -> DecisionRecord:
    """Sign ``record``, the human's verdict on ``pending``. INV3 and the binding to ``pending``
    are checked again whatever the caller did: this is the last step before a warn can count as a pass."""
    check_inv3(pending)
    binding = (record.decision_id, record.task_id, record.spec_sha256, record.mode, record.tree)
    if binding != (pending.decision_id, pending.task_id, pending.spec_sha256, pending.mode, pending.tree):
        raise DecisionError(
            f"decision record {record.decision_id} does not match pending decision {pending.decision_id} "
            "(id, task, spec, mode and reviewed tree must all agree)"
        )
    beyond = set(record.adjudicated_validators) - set(pending.warned_validators())
    if beyond:
        raise DecisionError(f"decision {record.decision_id} adjudicates validators that did not warn: {sorted(beyond)}")
    public, key = _key_pair(home, passphrase)
    unsigned = evolve(record, public_key_fingerprint=public_key_fingerprint(public), signature="")
    signature = key.sign(unsigned.signing_bytes())
    return evolve(unsigned, signature=base64.b64encode(signature).decode("ascii"))


def _key_pair(home: Path, passphrase: bytes | None) -> tuple[Ed25519PublicKey, Ed25519PrivateKey]:
    """The decision key pair (made on first use), refused when its halves do not match."""
    public = ensure_decision_keys(home)
    key = load_decision_private_key(home, passphrase)
    if key.public_key().public_bytes_raw() != public.public_bytes_raw():
        raise StateError(
            f"the decision key pair under {decision_key_paths(home)[0].parent} does not match: "
            "the public key is not the private key's",
        )
    return public, key


def ask_passphrase(home: Path) -> bytes | None:
    """The decision key's passphrase, asked of the person when the key has one."""
    try:
        if b"ENCRYPTED PRIVATE KEY" not in decision_key_paths(home)[0].read_bytes()[:64]:
            return None
    except OSError:
        return None
    return click.prompt("passphrase for your decision key", hide_input=True, err=True).encode("utf-8")


def _ssh_string(data: bytes) -> bytes:
    return len(data).to_bytes(4, "big") + data


def sign_ssh(home: Path, message: bytes, namespace: str, *, passphrase: bytes | None = None) -> str:
    """An OpenSSH ``SSHSIG`` signature of ``message`` in ``namespace`` with the decision key,
    armored as ``ssh-keygen -Y sign`` writes it (PROTOCOL.sshsig): what git puts in a commit's
    ``gpgsig`` header for ``snodo protocol sign`` (namespace ``git``)."""
    public, key = _key_pair(home, passphrase)
    # namespace, reserved, hash algorithm: in the signed data and in the blob alike
    scope = _ssh_string(namespace.encode("ascii")) + _ssh_string(b"") + _ssh_string(b"sha512")
    signed = b"SSHSIG" + scope + _ssh_string(hashlib.sha512(message).digest())
    public_blob = _ssh_string(b"ssh-ed25519") + _ssh_string(public.public_bytes_raw())
    signature_blob = _ssh_string(b"ssh-ed25519") + _ssh_string(key.sign(signed))
    blob = b"SSHSIG" + (1).to_bytes(4, "big") + _ssh_string(public_blob) + scope + _ssh_string(signature_blob)
    text = base64.b64encode(blob).decode("ascii")
    lines = [text[i : i + 70] for i in range(0, len(text), 70)]
    return "\n".join(["-----BEGIN SSH SIGNATURE-----", *lines, "-----END SSH SIGNATURE-----"]) + "\n"
