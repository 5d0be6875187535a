"""The attestation: an in-toto Statement v1 in a DSSE envelope, Ed25519-signed, whose two
subjects bind it to one commit *and* its tree (an amended commit inherits nothing).
securesystemslib reads and verifies; signing builds the same bytes here (a test checks they
are identical): ``securesystemslib.dsse`` imports every cloud signer it knows.
"""

from __future__ import annotations

import base64
import json
from collections.abc import Mapping
from typing import Any

from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey, Ed25519PublicKey

from snodo.state.keys import public_key_fingerprint

STATEMENT_TYPE = "https://in-toto.io/Statement/v1"
PAYLOAD_TYPE = "application/vnd.in-toto+json"
PREDICATE_TYPE = "https://snodo.dev/attestation/governed-commit/v1"
MAX_ENVELOPE_BYTES = 256 * 1024  # a larger note is not one snodo wrote: refused unread


class EnvelopeError(ValueError):
    """The note is not a well-formed, correctly signed attestation."""


class UnlistedKey(EnvelopeError):
    """No signature claims a key of the trusted set."""


def statement(commit: str, tree: str, predicate: Mapping[str, Any]) -> dict[str, Any]:
    return {
        "_type": STATEMENT_TYPE,
        "subject": [
            {"name": "commit", "digest": {"gitCommit": commit}},
            {"name": "tree", "digest": {"gitTree": tree}},
        ],
        "predicateType": PREDICATE_TYPE,
        "predicate": dict(predicate),
    }


def sign_statement(body: Mapping[str, Any], key: Ed25519PrivateKey) -> str:
    """The DSSE envelope of ``body`` signed with ``key``, one JSON line."""
    payload = json.dumps(body, sort_keys=True, separators=(",", ":")).encode("utf-8")
    kind = PAYLOAD_TYPE.encode("utf-8")
    pae = b"DSSEv1 %d %b %d %b" % (len(kind), kind, len(payload), payload)
    envelope = {
        "payload": base64.standard_b64encode(payload).decode("ascii"),
        "payloadType": PAYLOAD_TYPE,
        "signatures": [
            {
                "keyid": public_key_fingerprint(key.public_key()),
                "sig": base64.standard_b64encode(key.sign(pae)).decode("ascii"),
            }
        ],
    }
    return json.dumps(envelope, sort_keys=True, separators=(",", ":"))


def decode_envelope(text: str) -> tuple[Any, dict[str, Any]]:
    """``(envelope, statement)`` of a note, unverified: for reading, and for finding the key."""
    from securesystemslib.dsse import Envelope  # noqa: PLC0415 securesystemslib only when an attestation is signed or checked

    if len(text) > MAX_ENVELOPE_BYTES:
        raise EnvelopeError(f"the note is {len(text)} bytes, larger than any attestation snodo writes")
    try:
        envelope = Envelope.from_dict(json.loads(text))
    except Exception as exc:  # hostile input: whatever fails to parse is a refusal, never a crash
        raise EnvelopeError(f"the note is not a DSSE envelope ({type(exc).__name__}: {exc})") from None
    if envelope.payload_type != PAYLOAD_TYPE:
        raise EnvelopeError(f"the envelope's payload type is {envelope.payload_type!r}, not {PAYLOAD_TYPE!r}")
    try:
        body = json.loads(envelope.payload)
    except ValueError as exc:
        raise EnvelopeError(f"the envelope's payload is not JSON ({exc})") from None
    if not isinstance(body, dict) or body.get("_type") != STATEMENT_TYPE:
        raise EnvelopeError("the envelope does not hold an in-toto Statement v1")
    if body.get("predicateType") != PREDICATE_TYPE or not isinstance(body.get("predicate"), dict):
        raise EnvelopeError(f"the statement's predicate is not snodo's ({str(body.get('predicateType'))[:100]!r})")
    return envelope, body


def signer_ids(envelope: Any) -> list[str]:
    """The key ids the envelope's signatures claim (unchecked)."""
    return [str(k) for k in envelope.signatures]


class Verifier:
    """Checks envelopes against a fixed set of public keys (built once per range, used for thousands)."""

    def __init__(self, keys: list[Ed25519PublicKey]) -> None:
        from securesystemslib.signer import SSlibKey  # type: ignore[attr-defined]  # noqa: PLC0415 securesystemslib only when an attestation is signed or checked

        self._keys = {public_key_fingerprint(k): SSlibKey.from_crypto(k, keyid=public_key_fingerprint(k)) for k in keys}

    def verify(self, envelope: Any) -> str:
        """The fingerprint of the key whose signature on ``envelope`` verifies."""
        from securesystemslib.exceptions import VerificationError  # noqa: PLC0415 securesystemslib only when an attestation is signed or checked

        candidates = [self._keys[k] for k in signer_ids(envelope) if k in self._keys]
        if not candidates:
            raise UnlistedKey("no signature by a key the base lists for attestations")
        try:
            accepted = envelope.verify(candidates, 1)
        except (VerificationError, ValueError) as exc:
            raise EnvelopeError(f"the signature does not verify ({exc})") from None
        return str(next(iter(accepted)))


def subjects(body: Mapping[str, Any]) -> tuple[str, str]:
    """``(commit, tree)`` the statement names; empty strings where it names none."""
    commit = tree = ""
    for item in body.get("subject") or ():
        digest = item.get("digest") if isinstance(item, dict) else None
        if isinstance(digest, dict):
            commit = str(digest.get("gitCommit", commit))
            tree = str(digest.get("gitTree", tree))
    return commit, tree
