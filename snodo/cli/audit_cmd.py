"""``snodo audit``: verify the hash chain or show events. Both are read-only."""

from __future__ import annotations

from pathlib import Path

import click

from snodo.cli.common import json_option, project_root, protocol_option
from snodo.errors import SnodoError


@click.group()
def audit() -> None:
    """The hash-chained audit log (.snodo/audit.log)."""


@audit.command("verify")
@protocol_option
@json_option
def verify_cmd(protocol_path: Path | None, as_json: bool) -> None:
    """Check every line's hash and link, and the tail. Exit 0 intact, 1 broken, 4 cannot run."""
    from snodo.cli.output import console, emit_json
    from snodo.state.audit import AuditLog

    try:
        path = project_root(protocol_path) / ".snodo" / "audit.log"
        report = AuditLog(path).verify()
    except SnodoError as exc:
        exc.exit_code = 4
        raise
    if as_json:
        emit_json(
            {
                "path": str(path),
                "ok": report.ok,
                "count": report.count,
                "line": report.line,
                "reason": report.reason or None,
            }
        )
    elif report.ok:
        console().print(f"[green]intact[/] {path}: {report.count} events, chain and tail verified")
    else:
        console().print(f"[red]broken[/] {path}: line {report.line}: {report.reason}")
    raise SystemExit(0 if report.ok else 1)


@audit.command("show")
@click.option("--event", "event", default=None, help="Only events of this name.")
@click.option("--last", "last", type=click.IntRange(min=1), default=None, help="Only the last N events.")
@protocol_option
@json_option
def show_cmd(event: str | None, last: int | None, protocol_path: Path | None, as_json: bool) -> None:
    """Print audit events (oldest first), each whole: long lines wrap, nothing is cut."""
    import json

    from snodo.cli.output import console, emit_json
    from snodo.state.audit import AuditLog

    path = project_root(protocol_path) / ".snodo" / "audit.log"
    records = AuditLog(path).records(event=event, last=last)
    if as_json:
        emit_json({"path": str(path), "events": records})
        return
    from rich.text import Text

    if not records:
        console().print(f"no matching events in {path}")
    for r in records:
        data = json.dumps(r["data"], sort_keys=True, ensure_ascii=False)
        console().print(
            Text.assemble(
                (f"{r['seq']:>5} {r['ts']} ", "dim"),
                (str(r["event"]), "bold"),
                " ",
                (str(r["mode"] or "-"), "cyan"),
                " ",
                data,
            ),
            overflow="fold",
        )
