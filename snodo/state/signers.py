"""``.snodo/allowed_signers``: who a project trusts, in git's ``gpg.ssh.allowedSignersFile``
format (``principal [options] key-type base64-key [comment]``), parsed here only. Its
``namespaces="…"`` option says what a key may sign: :data:`DECISION_NAMESPACE` (human
decisions), :data:`ATTESTATION_NAMESPACE` (a home's audit key on governed commits), ``git``.
A line without it allows every namespace (git's rule) but attestations: a machine's
statement, which a person's key must not become by omission."""

from __future__ import annotations

import re

from attrs import frozen
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey

from snodo.base.errors import StateError
from snodo.state.keys import parse_public_key, public_key_fingerprint

ALLOWED_SIGNERS = "allowed_signers"
DECISION_NAMESPACE = "snodo-decision"
ATTESTATION_NAMESPACE = "snodo-attestation"

# Non-space characters and double-quoted strings (an option's value may quote a comma or a space).
_TOKEN = re.compile(r'(?:[^\s"]+|"[^"]*")+')
_NAMESPACES = re.compile(r'(?:^|,)namespaces="([^"]*)"')
_KEY_TYPE = re.compile(r"^(ssh-|ecdsa-|sk-|rsa-)")


@frozen(kw_only=True)
class Signer:
    """``key``: ``None`` for SSH key types only git checks; ``namespaces``: ``None`` if all are allowed."""

    name: str
    key: Ed25519PublicKey | None
    namespaces: frozenset[str] | None = None
    line: str = ""

    def allows(self, namespace: str) -> bool:
        if self.namespaces is None:
            return namespace != ATTESTATION_NAMESPACE
        return namespace in self.namespaces


def parse_allowed_signers(text: str, source: str) -> list[Signer]:
    """Every key line; one that does not parse fails the whole file (a typo must not
    silently drop, or half-read, the team's list)."""
    lines = ((n, line.strip()) for n, line in enumerate(text.splitlines(), start=1))
    return [_signer(line, f"{source}:{n}") for n, line in lines if line and not line.startswith("#")]


def _signer(line: str, where: str) -> Signer:
    parts = _TOKEN.findall(line)
    options = parts.pop(1) if len(parts) >= 2 and not _KEY_TYPE.match(parts[1]) else ""
    if len(parts) < 3 or not _KEY_TYPE.match(parts[1]):
        raise StateError(
            f'{where}: expected `name [namespaces="…"] ssh-ed25519 AAAA...`, got {line[:80]!r}',
            hint="`snodo keys show` prints the lines to add for your keys",
        )
    key = parse_public_key(f"{parts[1]} {parts[2]}".encode(), where) if parts[1] == "ssh-ed25519" else None
    found = _NAMESPACES.search(options)
    namespaces = frozenset(n.strip() for n in found.group(1).split(",") if n.strip()) if found else None
    return Signer(name=parts[0], key=key, namespaces=namespaces, line=line)


def signers_for(signers: list[Signer], namespace: str) -> dict[str, Signer]:
    """The Ed25519 keys allowed to sign in ``namespace``, by fingerprint."""
    out: dict[str, Signer] = {}
    for signer in signers:
        if signer.key is not None and signer.allows(namespace):
            out.setdefault(public_key_fingerprint(signer.key), signer)
    return out
