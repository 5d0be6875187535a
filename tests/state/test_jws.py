"""The HS256 token signature written without PyJWT (#26: its import cost every run ~60 ms)
is a standard JWT, and everything but a correct HS256 MAC by the key is refused."""

from __future__ import annotations

import base64
import json

import jwt
import pytest

from snodo.state import jws

KEY = b"k" * 64
NONE = base64.urlsafe_b64encode(b'{"alg":"none"}').rstrip(b"=").decode()
SPACED = base64.urlsafe_b64encode(b'{"alg":"HS256 "}').rstrip(b"=").decode()
CLAIMS = {"jti": "a" * 32, "iat": 1, "exp": 2, "task_id": "t", "validators": ["x", "é"]}


def _b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def test_pyjwt_and_we_read_each_other_s_tokens() -> None:
    ours = jws.sign(CLAIMS, KEY)
    assert jwt.decode(ours, KEY, algorithms=["HS256"], options={"verify_exp": False}) == CLAIMS
    assert jwt.get_unverified_header(ours) == {"alg": "HS256", "typ": "JWT"}
    assert jws.verify(jwt.encode(CLAIMS, KEY, algorithm="HS256"), KEY) == CLAIMS


def test_another_algorithm_or_key_or_a_changed_byte_is_a_bad_signature() -> None:
    header, payload, signature = jws.sign(CLAIMS, KEY).split(".")
    forged = _b64(json.dumps({**CLAIMS, "task_id": "u"}).encode())
    bad = [
        jwt.encode(CLAIMS, b"o" * 64, algorithm="HS256"),
        jwt.encode(CLAIMS, KEY, algorithm="HS512"),
        f"{NONE}.{payload}.",
        f"{SPACED}.{payload}.{signature}",
        f"{_b64(b'{}')}.{payload}.{signature}",
        f"{header}.{forged}.{signature}",
        f"{header}.{payload}.{signature[:-2]}{'A' if signature[-2] != 'A' else 'B'}{signature[-1]}",
        f"{header}.{payload}.",
    ]
    for token in bad:
        with pytest.raises(jws.BadSignature):
            jws.verify(token, KEY)


@pytest.mark.parametrize(
    "token",
    [
        "not-a-token",
        "a.b",
        "a.b.c.d",
        "",
        f"{_b64(b'not json')}.e30.sig",
        f"{_b64(b'[1]')}.e30.sig",
        "ey!.e30.sig",
        f"{_b64(b'{}')}=.e30.sig",
        "e.e30.sig",
    ],
)
def test_what_is_not_a_compact_jws_of_json_objects_is_malformed(token: str) -> None:
    with pytest.raises(jws.MalformedToken):
        jws.verify(token, KEY)


def test_a_correctly_signed_payload_that_is_not_an_object_is_malformed() -> None:
    header = _b64(b'{"alg":"HS256","typ":"JWT"}')
    payload = _b64(b"[1, 2]")
    signature = _b64(jws._mac(KEY, f"{header}.{payload}"))
    with pytest.raises(jws.MalformedToken, match="payload"):
        jws.verify(f"{header}.{payload}.{signature}", KEY)
