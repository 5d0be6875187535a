"""The only code that reads the decision private key; imported by ``snodo authorize`` alone.

Keeping the private key behind this one module (and out of everything the MCP server or
the engine imports) is what makes a decision record proof that a human ran ``snodo
authorize``: an agent driving the tool surface has no code path that can sign. A test
checks that no other state module imports this one.
"""

from __future__ import annotations

import base64
from pathlib import Path

from attrs import evolve
from cryptography.exceptions import UnsupportedAlgorithm
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from snodo.errors import DecisionError, StateError
from snodo.state.decisions import DecisionRecord, check_inv3
from snodo.state.keys import (
    decision_key_paths,
    ensure_decision_keys,
    public_key_fingerprint,
    require_owner_only,
)
from snodo.state.sessions import PendingDecision


def load_decision_private_key(home: Path) -> Ed25519PrivateKey:
    private, _ = decision_key_paths(home)
    try:
        with open(private, "rb") as handle:
            require_owner_only(private, handle.fileno())
            data = handle.read()
    except FileNotFoundError:
        raise StateError(f"no decision private key at {private}") from None
    except OSError as exc:
        raise StateError(f"cannot read {private}: {exc.strerror or exc}") from exc
    try:
        key = serialization.load_pem_private_key(data, password=None)
    except (ValueError, TypeError, UnsupportedAlgorithm) as exc:
        raise StateError(f"{private} is not a valid unencrypted PEM private key: {exc}") from exc
    if not isinstance(key, Ed25519PrivateKey):
        raise StateError(f"{private} holds a {type(key).__name__}, not an Ed25519 private key")
    return key


def sign_decision(home: Path, record: DecisionRecord, pending: PendingDecision) -> DecisionRecord:
    """Sign ``record``, the human's verdict on ``pending``, creating the key pair on first use.

    INV3 and the binding to ``pending`` are checked again here, whatever the caller did: this
    is the last step before a decision becomes able to turn a warn into a pass.
    """
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
    public = ensure_decision_keys(home)
    key = load_decision_private_key(home)
    fingerprint = public_key_fingerprint(public)
    if public_key_fingerprint(key.public_key()) != fingerprint:
        raise StateError(
            f"the decision key pair under {decision_key_paths(home)[0].parent} does not match: "
            "the public key is not the private key's",
        )
    unsigned = evolve(record, public_key_fingerprint=fingerprint, signature="")
    signature = key.sign(unsigned.signing_bytes())
    return evolve(unsigned, signature=base64.b64encode(signature).decode("ascii"))
