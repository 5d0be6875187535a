"""``snodo verify``: the merge gate. Every commit of a range must carry a valid attestation
of a governed run, or a person's good signature, judged against the base's trust root."""

from __future__ import annotations

import sys
from pathlib import Path

import click

from snodo.base.text import shown
from snodo.cli.common import git_work_tree, json_option
from snodo.cli.output import emit_json, print_note


@click.command()
@click.argument("range_arg", metavar="[RANGE]", required=False)
@click.option("--base", "base", default=None, help="Take the trust root from REF (default: the range's left side).")
@json_option
def verify(range_arg: str | None, base: str | None, as_json: bool) -> None:
    """Check that every commit in RANGE was judged by a governed run or signed by a person.

    RANGE is git's `A..B` (default: the current branch's commits not on its upstream). Each
    commit is judged under the .snodo/allowed_signers and protocol in force at its parent:
    as committed at the base (A, or --base), then only changes a listed person signed (the
    rule `run` uses). Fetch the notes first: git fetch origin refs/notes/snodo:refs/notes/snodo

    Exit 0 every commit passes, 1 some commit fails (one line each: commit, reason, what to
    do), 4 the check could not run.
    """
    from snodo.evidence.verify import verify as run_verify  # noqa: PLC0415 `verify --help` stays light

    report = run_verify(git_work_tree(Path.cwd()), range_arg, base)
    if as_json:
        emit_json(report.as_json())
    else:
        for v in report.verdicts:
            if not v.passed:
                click.echo(f"{v.sha[:12]} {shown(v.subject)[:60]!r}: {shown(v.reason)} -> {v.action}")
        passed = sum(v.passed for v in report.verdicts)
        print_note(
            f"{passed} of {len(report.verdicts)} commit(s) pass against {report.base} ({report.base_commit[:12]})"
        )
    sys.exit(0 if report.ok else 1)
