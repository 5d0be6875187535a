"""``snodo keys``: the line to add to ``.snodo/allowed_signers`` for your decision key, and
an optional passphrase on that key."""

from __future__ import annotations

import getpass
import socket

import click

from snodo.cli.common import json_option


@click.group()
def keys() -> None:
    """Your decision key: show it for .snodo/allowed_signers, or protect it with a passphrase."""


@keys.command("show")
@click.option("--name", default=None, help="The name to put on the line (default: user@host).")
@json_option
def show_cmd(name: str | None, as_json: bool) -> None:
    """Print the `name key` line that lets your decisions count in a project.

    Add it to the project's .snodo/allowed_signers and commit it; with that file present,
    only the keys it lists adjudicate escalations, on every machine. The key pair is
    created on first use.
    """
    from snodo.cli.output import emit_json
    from snodo.state.audit_key import audit_public_key
    from snodo.state.home import snodo_home
    from snodo.state.keys import decision_key_paths, ensure_decision_keys, openssh_public, public_key_fingerprint

    home = snodo_home()
    key = ensure_decision_keys(home)
    who = name or f"{getpass.getuser()}@{socket.gethostname()}"
    if any(c.isspace() for c in who) or not who:
        raise click.BadParameter("a signer name is one word (no spaces)", param_hint="--name")
    line = f"{who} {openssh_public(key)}"
    audit = audit_public_key(home)
    if as_json:
        emit_json(
            {
                "name": who,
                "allowed_signers_line": line,
                "fingerprint": public_key_fingerprint(key),
                "public_key_file": str(decision_key_paths(home)[1]),
                "audit_key": openssh_public(audit) if audit else None,
            }
        )
        return
    click.echo(line)
    click.echo("add this line to .snodo/allowed_signers (and commit it) so your decisions count there", err=True)


@keys.command("protect")
def protect_cmd() -> None:
    """Put a passphrase on your decision private key.

    `snodo authorize` then asks for it before signing, so a process running as you (an
    agent's shell included) cannot sign a decision without you typing it.
    """
    from snodo.authorize_signing import protect_decision_key
    from snodo.state.home import snodo_home

    passphrase = click.prompt("new passphrase for the decision key", hide_input=True, confirmation_prompt=True)
    if len(passphrase) < 8:
        raise click.BadParameter("use at least 8 characters")
    path = protect_decision_key(snodo_home(), passphrase.encode("utf-8"))
    click.echo(f"{path} is now encrypted; `snodo authorize` will ask for the passphrase")
