"""``snodo attest show``: a commit's attestation, decoded; ``snodo push``: a branch and its
attestations together (a note that stays behind is a commit ``snodo verify`` refuses)."""

from __future__ import annotations

import json
from pathlib import Path

import click

from snodo.base.text import shown
from snodo.cli.common import git_work_tree, json_option
from snodo.cli.output import emit_json
from snodo.git.runner import git_out


@click.group()
def attest() -> None:
    """Attestations: the signed statement a governed run puts on each of its commits."""


@attest.command("show")
@click.argument("rev")
@json_option
def show_cmd(rev: str, as_json: bool) -> None:
    """Print the in-toto statement attached to commit REV (refs/notes/snodo), decoded.

    It is shown as stored, not judged: `snodo verify` checks it against a base's keys."""
    from snodo.evidence.share import show  # noqa: PLC0415 `attest/push --help` stay light

    found = show(git_work_tree(Path.cwd()), rev)
    if as_json:
        emit_json(found)
        return
    predicate = found["statement"]["predicate"]
    click.echo(f"commit      {found['commit']}")
    click.echo(f"signed by   {', '.join(found['signed_by'])} (not verified here: run `snodo verify`)")
    click.echo(f"judged      {str(predicate.get('judged')).lower()}")
    click.echo(shown(json.dumps(found["statement"], indent=2, sort_keys=True)))


@click.command()
@click.argument("remote", default="origin")
@click.argument("branch", required=False)
@json_option
def push(remote: str, branch: str | None, as_json: bool) -> None:
    """Push BRANCH (default: the current one) and refs/notes/snodo to REMOTE (default: origin)."""
    from snodo.evidence.share import push as run_push  # noqa: PLC0415 `attest/push --help` stay light

    repo = git_work_tree(Path.cwd())
    name = branch or git_out(repo, "symbolic-ref", "--short", "HEAD")
    done = run_push(repo, remote, name)
    if as_json:
        emit_json({"remote": remote, "branch": name, "ran": done})
    else:
        for line in done:
            click.echo(line)
