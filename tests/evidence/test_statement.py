"""The envelope read back from a note is hostile: every malformed or mis-signed shape is a
named refusal, never a crash and never a pass."""

from __future__ import annotations

import base64
import json

import pytest
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from snodo.evidence.statement import (
    MAX_ENVELOPE_BYTES,
    EnvelopeError,
    UnlistedKey,
    Verifier,
    decode_envelope,
    sign_statement,
    statement,
    subjects,
)

KEY = Ed25519PrivateKey.generate()
NOTE = sign_statement(statement("c" * 40, "t" * 40, {"judged": True}), KEY)


def test_a_signed_statement_round_trips() -> None:
    envelope, body = decode_envelope(NOTE)
    assert Verifier([KEY.public_key()]).verify(envelope).startswith("sha256:")
    assert subjects(body) == ("c" * 40, "t" * 40)


def test_another_key_is_unlisted_and_a_forged_signature_does_not_verify() -> None:
    envelope, _ = decode_envelope(NOTE)
    with pytest.raises(UnlistedKey):
        Verifier([Ed25519PrivateKey.generate().public_key()]).verify(envelope)
    forged = json.loads(NOTE)
    forged["signatures"][0]["sig"] = base64.b64encode(b"\0" * 64).decode()
    with pytest.raises(EnvelopeError, match="does not verify"):
        Verifier([KEY.public_key()]).verify(decode_envelope(json.dumps(forged))[0])


def _payload(body: object, payload_type: str = "application/vnd.in-toto+json") -> str:
    raw = base64.b64encode(json.dumps(body).encode()).decode()
    return json.dumps({"payload": raw, "payloadType": payload_type, "signatures": []})


@pytest.mark.parametrize(
    ("note", "why"),
    [
        ("", "not a DSSE envelope"),
        ("[1, 2]", "not a DSSE envelope"),
        ('{"payload": "!!", "payloadType": "x", "signatures": []}', "not a DSSE envelope"),
        (NOTE + "\n" + NOTE, "not a DSSE envelope"),  # two notes concatenated
        ("x" * (MAX_ENVELOPE_BYTES + 1), "larger than any attestation"),
        (_payload({}, "text/plain"), "payload type"),
        (_payload([1]), "in-toto Statement"),
        (_payload({"_type": "https://in-toto.io/Statement/v1", "predicateType": "x", "predicate": {}}), "not snodo's"),
    ],
)
def test_malformed_notes_are_refused_by_name(note: str, why: str) -> None:
    with pytest.raises(EnvelopeError, match=why):
        decode_envelope(note)


def test_the_envelope_signed_here_is_byte_for_byte_securesystemslib_s() -> None:
    """Signing skips securesystemslib.signer (start-up cost, #26); Ed25519 is deterministic,
    so the library's envelope for the same key and statement must be identical."""
    from securesystemslib.dsse import Envelope
    from securesystemslib.signer import CryptoSigner, SSlibKey  # type: ignore[attr-defined]

    from snodo.evidence.statement import PAYLOAD_TYPE
    from snodo.state.keys import public_key_fingerprint

    body = statement("a" * 40, "b" * 40, {"judged": True, "text": "é"})
    payload = json.dumps(body, sort_keys=True, separators=(",", ":")).encode("utf-8")
    theirs = Envelope(payload=payload, payload_type=PAYLOAD_TYPE, signatures={})
    public = SSlibKey.from_crypto(KEY.public_key(), keyid=public_key_fingerprint(KEY.public_key()))
    theirs.sign(CryptoSigner(KEY, public))
    assert sign_statement(body, KEY) == json.dumps(theirs.to_dict(), sort_keys=True, separators=(",", ":"))
