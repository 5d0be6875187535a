"""The validation token's signature: a compact JWS (RFC 7515), HS256 only, on ``hmac`` (PyJWT
imports cryptography's X.509 stack and ``urllib.request`` on the path of every governed run).
The bytes are a standard JWT (tests/state/test_jws.py checks PyJWT reads ours and we read its);
as with PyJWT's ``algorithms=["HS256"]``, any other ``alg`` is refused before the key is used."""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
from collections.abc import Mapping
from typing import Any

ALGORITHM = "HS256"
_HEADER = json.dumps({"alg": ALGORITHM, "typ": "JWT"}, separators=(",", ":")).encode()
_B64URL = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_")


class MalformedToken(ValueError):
    pass


class BadSignature(ValueError):
    """Another algorithm than HS256, or a MAC that does not match the key."""


def _b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode("ascii")


def _unb64(segment: str) -> bytes:
    if not set(segment) <= _B64URL or len(segment) % 4 == 1:
        raise MalformedToken("a segment is not unpadded base64url")
    return base64.urlsafe_b64decode(segment + "=" * (-len(segment) % 4))  # only base64url, padded: it decodes


def _json_object(data: bytes, what: str) -> dict[str, Any]:
    try:
        value = json.loads(data)
    except (ValueError, UnicodeDecodeError) as exc:
        raise MalformedToken(f"the {what} is not JSON ({exc})") from None
    if not isinstance(value, dict):
        raise MalformedToken(f"the {what} is not a JSON object")
    return value


def _mac(key: bytes, signing_input: str) -> bytes:
    return hmac.new(key, signing_input.encode("ascii"), hashlib.sha256).digest()


def sign(claims: Mapping[str, Any], key: bytes) -> str:
    signing_input = f"{_b64(_HEADER)}.{_b64(json.dumps(dict(claims), separators=(',', ':')).encode())}"
    return f"{signing_input}.{_b64(_mac(key, signing_input))}"


def verify(token: str, key: bytes) -> dict[str, Any]:
    parts = token.split(".") if isinstance(token, str) else []
    if len(parts) != 3:
        raise MalformedToken("a token has three dot-separated segments")
    header = _json_object(_unb64(parts[0]), "header")
    if header.get("alg") != ALGORITHM:
        raise BadSignature(f"the algorithm {str(header.get('alg'))[:20]!r} is not allowed")
    if not hmac.compare_digest(_unb64(parts[2]), _mac(key, f"{parts[0]}.{parts[1]}")):
        raise BadSignature("the signature does not match")
    return _json_object(_unb64(parts[1]), "payload")
