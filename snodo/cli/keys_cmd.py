"""``snodo keys``: the ``.snodo/allowed_signers`` lines for your two keys (the decision key
for decisions, the audit key for the attestations on governed commits), and an optional
passphrase on the decision key."""

from __future__ import annotations

import getpass
import socket

import click

from snodo.cli.common import json_option


@click.group()
def keys() -> None:
    """Your keys: show their allowed_signers lines, or protect the decision key with a passphrase."""


@keys.command("show")
@click.option("--name", default=None, help="The name to put on the lines (default: user@host).")
@json_option
def show_cmd(name: str | None, as_json: bool) -> None:
    """Print the allowed_signers lines that let your decisions and your runs count in a project.

    Add them to the project's .snodo/allowed_signers and commit them on the main branch.
    The first line makes your decisions count (namespace snodo-decision); the second makes
    the attestations your governed runs put on their commits count for `snodo verify`
    (namespace snodo-attestation). Both key pairs are created on first use.
    """
    from snodo.cli.output import emit_json
    from snodo.state.audit_key import audit_key_paths, audit_signing_key
    from snodo.state.home import snodo_home
    from snodo.state.keys import decision_key_paths, ensure_decision_keys, openssh_public, public_key_fingerprint
    from snodo.state.signers import ATTESTATION_NAMESPACE, DECISION_NAMESPACE

    home = snodo_home()
    key = ensure_decision_keys(home)
    audit = audit_signing_key(home).public_key()
    who = name or f"{getpass.getuser()}@{socket.gethostname()}"
    if any(c.isspace() or c in "\"'#" for c in who) or not who:
        raise click.BadParameter("a signer name is one word (no spaces or quotes)", param_hint="--name")
    line = f'{who} namespaces="{DECISION_NAMESPACE}" {openssh_public(key)}'
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
    from snodo.cli.output import print_note

    print_note(
        "add these lines to .snodo/allowed_signers on the main branch (and commit them): the first makes "
        "your decisions count, the second the attestations on your governed runs' commits"
    )


@keys.command("protect")
@json_option
def protect_cmd(as_json: bool) -> None:
    """Put a passphrase on your decision private key.

    `snodo authorize` then asks for it before signing, so a process running as you (an
    agent's shell included) cannot sign a decision without you typing it.
    """
    from snodo.authorize_signing import protect_decision_key
    from snodo.state.home import snodo_home

    passphrase = click.prompt(
        "new passphrase for the decision key", hide_input=True, confirmation_prompt=True, err=as_json
    )
    if len(passphrase) < 8:
        raise click.BadParameter("use at least 8 characters")
    path = protect_decision_key(snodo_home(), passphrase.encode("utf-8"))
    if as_json:
        from snodo.cli.output import emit_json

        emit_json({"private_key_file": str(path), "encrypted": True})
        return
    click.echo(f"{path} is now encrypted; `snodo authorize` will ask for the passphrase")
