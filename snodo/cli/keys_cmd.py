"""``snodo keys``: the ``.snodo/allowed_signers`` lines for your decision and audit keys, and an
optional passphrase on the decision key."""

from __future__ import annotations

import getpass
import socket
import sys
from pathlib import Path
from typing import TYPE_CHECKING

import click

from snodo.base.errors import SnodoError, StateError
from snodo.cli.common import json_option
from snodo.cli.output import emit_json, print_note
from snodo.state.home import snodo_home

if TYPE_CHECKING:
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey


@click.group()
def keys() -> None:
    """Your keys: show their allowed_signers lines, or protect the decision key with a passphrase."""


@keys.command("show")
@click.option("--name", default=None, help="The name to put on the lines (default: user@host).")
@json_option
def show_cmd(name: str | None, as_json: bool) -> None:
    """Print the allowed_signers lines that let your decisions and your runs count in a project.

    Put them in .snodo/allowed_signers and sign it with `snodo protocol sign`. The first
    line counts your decisions (namespace snodo-decision) and signed .snodo/ commits
    (namespace git); the second your governed runs' attestations, for `snodo verify`
    (namespace snodo-attestation). Both key pairs are created on first use.
    """
    from snodo.state.audit_key import audit_key_paths, audit_signing_key  # noqa: PLC0415 `keys --help` stays light
    from snodo.state.keys import decision_key_paths, ensure_decision_keys, openssh_public, public_key_fingerprint  # noqa: PLC0415 `keys --help` stays light
    from snodo.state.signers import ATTESTATION_NAMESPACE, DECISION_NAMESPACE  # noqa: PLC0415 `keys --help` stays light

    home = snodo_home()
    key = ensure_decision_keys(home)
    audit = audit_signing_key(home).public_key()
    who = name or f"{getpass.getuser()}@{socket.gethostname()}"
    if any(c.isspace() or c in "\"'#" for c in who) or not who:
        raise click.BadParameter("a signer name is one word (no spaces or quotes)", param_hint="--name")
    # namespace git: the decision key also signs .snodo/ commits, which `git verify-commit` checks
    line = f'{who} namespaces="{DECISION_NAMESPACE},git" {openssh_public(key)}'
    audit_line = f'{who} namespaces="{ATTESTATION_NAMESPACE}" {openssh_public(audit)}'
    if as_json:
        emit_json(
            {
                "name": who,
                "allowed_signers_line": line,
                "fingerprint": public_key_fingerprint(key),
                "public_key_file": str(decision_key_paths(home)[1]),
                "audit_key": openssh_public(audit),
                "audit_allowed_signers_line": audit_line,
                "audit_fingerprint": public_key_fingerprint(audit),
                "audit_public_key_file": str(audit_key_paths(home)[1]),
            }
        )
        return
    click.echo(line)
    click.echo(audit_line)
    print_note(
        "add these lines to .snodo/allowed_signers and sign it (`snodo protocol sign -m 'trust my key'`): "
        "the first makes your decisions and signed .snodo/ commits count, the second the attestations on "
        "your governed runs' commits"
    )


@keys.command("protect")
@json_option
def protect_cmd(as_json: bool) -> None:
    """Put a passphrase on your decision private key.

    `snodo authorize` then asks for it before signing, so a process running as you (an
    agent's shell included) cannot sign a decision without you typing it.
    """
    from snodo.cli.signing import protect_decision_key  # noqa: PLC0415 the private-key code only for a signing command (tests/test_boundaries.py)

    passphrase = click.prompt(
        "new passphrase for the decision key", hide_input=True, confirmation_prompt=True, err=as_json
    )
    if len(passphrase) < 8:
        raise click.BadParameter("use at least 8 characters")
    path = protect_decision_key(snodo_home(), passphrase.encode("utf-8"))
    if as_json:
        emit_json({"private_key_file": str(path), "encrypted": True})
        return
    click.echo(f"{path} is now encrypted; `snodo authorize` will ask for the passphrase")


#: What to do when this home's keys do not count in a project yet.
TRUST_MY_KEY = "snodo keys show >> .snodo/allowed_signers && snodo protocol sign -m 'trust my key'"


def home_notice() -> str | None:
    """A line for the person when this process made the home's keys (a new identity) or read an
    ``allowed_signers`` in force listing neither; it never makes a key or asks git."""
    from snodo.state.keys import created_here  # noqa: PLC0415 `keys --help` stays light

    try:
        home = snodo_home()
    except (SnodoError, OSError):  # a notice never turns a command into a failure
        return None
    if created_here:
        return (
            f"the snodo home {home} is new: its keys were just made, so you are a new identity to every project "
            f"(decisions, signed .snodo/ commits and attestations of the old keys are not yours any more). If you "
            f"had another home, restore it (its keys/ directory); otherwise let a project trust these keys: "
            f"{TRUST_MY_KEY} (`>` for a project's first list)"
        )
    if not _unlisted(home):
        return None
    return (
        f"the keys of the snodo home {home} are not in the project's .snodo/allowed_signers in force: your "
        f"decisions, signed .snodo/ commits and runs' attestations do not count here. A listed person adds them "
        f"({TRUST_MY_KEY}), or restore the home whose keys are listed"
    )


def _unlisted(home: Path) -> bool:
    committed = sys.modules.get("snodo.protocol.committed")
    lists: list[str] = list(getattr(committed, "lists_in_force", ()) or ())
    if not lists:
        return False
    try:
        from snodo.state.audit_key import audit_public_key  # noqa: PLC0415 `keys --help` stays light
        from snodo.state.signers import parse_allowed_signers  # noqa: PLC0415 `keys --help` stays light

        mine = {k.public_bytes_raw() for k in (_decision_public(home), audit_public_key(home)) if k}
        listed = {
            s.key.public_bytes_raw()
            for text in lists
            for s in parse_allowed_signers(text, ".snodo/allowed_signers")
            if s.key is not None
        }
    except (SnodoError, OSError):  # no key yet, or a list the command itself reported
        return False
    return bool(mine) and not mine & listed


def _decision_public(home: Path) -> Ed25519PublicKey | None:
    from snodo.state.keys import load_decision_public_key  # noqa: PLC0415 `keys --help` stays light

    try:
        return load_decision_public_key(home)
    except StateError:  # not made yet: only the audit key speaks for this home
        return None
