"""``snodo audit``: verify the signed chain, show events, export the log for offline checks,
and restart a lost log (a person's act, recorded in the new log's first signed line)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import click

from snodo.base.errors import SnodoError, StateError
from snodo.base.text import shown
from snodo.cli.common import confirm, could_not_run, project_options, project_root, refuse_when_confined
from snodo.cli.output import console, emit_json


@click.group()
def audit() -> None:
    """The signed, hash-chained audit log (in the git directory: .git/snodo/audit.log)."""


@audit.command("verify")
@click.argument("file", required=False, type=click.Path(dir_okay=False, path_type=Path))
@click.option(
    "--key",
    "key_path",
    type=click.Path(dir_okay=False, path_type=Path),
    default=None,
    help="Trust this audit public key (OpenSSH or PEM file) instead of your own; for an exported log.",
)
@project_options
@could_not_run
def verify_cmd(file: Path | None, key_path: Path | None, protocol_path: Path | None, as_json: bool) -> None:
    """Check every line's hash and link, the signed checkpoints, and the checkpoint recorded
    in your home (truncation, deletion, rollback). FILE defaults to the project's log.

    Exit 0 intact, 1 broken (names line and reason), 4 cannot run.
    """
    from snodo.state.keys import load_public_key_file  # noqa: PLC0415 `audit --help` stays light

    log = _log(protocol_path, file)
    try:
        key = load_public_key_file(key_path) if key_path is not None else None
    except FileNotFoundError:
        raise StateError(f"no public key file at {key_path}") from None
    report = log.verify(key=key)
    restarts = _restarts(log) if report.ok else []
    if as_json:
        emit_json(
            {
                "path": str(log.path),
                "ok": report.ok,
                "count": report.count,
                "checkpoints": report.checkpoints,
                "key": report.key or None,
                "line": report.line,
                "reason": report.reason or None,
                "restarts": restarts,
            }
        )
    else:
        _print_verified(log.path, report, restarts)
    raise SystemExit(0 if report.ok else 1)


def _log(protocol_path: Path | None, file: Path | None = None) -> Any:
    """The project's audit log, or the one at ``file`` unless no log is there (a log this home
    has signed before is checked even when the file is gone: its deletion is a fault)."""
    from snodo.state.audit import AuditLog  # noqa: PLC0415 `audit --help` stays light
    from snodo.state.runtime import audit_log_path  # noqa: PLC0415 `audit --help` stays light

    log = AuditLog(audit_log_path(project_root(protocol_path)) if file is None else file)
    if file is not None and not file.is_file() and not log.anchor_path.exists():
        raise StateError(f"no audit log at {file}", hint="pass the path of an audit.log file")
    return log


def _print_verified(path: Path, report: Any, restarts: list[dict[str, Any]]) -> None:
    from rich.text import Text  # noqa: PLC0415 rich only for a person

    if report.ok:
        console().print(
            f"[green]intact[/] {path}: {report.count} events under {report.checkpoints} signed checkpoint(s)"
            + (f", key {report.key}" if report.key else "")
        )
        for r in restarts:
            head = r.get("lost_head") or {}
            console().print(
                Text(
                    f"restarted at line {r['line']} ({r['ts']}): the previous log was lost; its last signed head "
                    f"was seq {head.get('seq')} hash {head.get('hash')} (checkpoint of {head.get('ts')}); "
                    f"found: {shown(str(r.get('found', '')))}; reason: {shown(str(r.get('reason', '')))}",
                    style="yellow",
                ),
            )
    else:
        from rich.markup import escape  # noqa: PLC0415 rich only for a person

        console().print(f"[red]broken[/] {escape(str(path))}: line {report.line}: {escape(shown(report.reason))}")
        console().print("see docs/architecture.md (audit log) for what each fault means and what to do", style="dim")


@audit.command("export")
@click.argument("dest", type=click.Path(file_okay=False, path_type=Path))
@project_options
def export_cmd(dest: Path, protocol_path: Path | None, as_json: bool) -> None:
    """Write the log and the public key that signed it into DEST, for an offline check with
    `snodo audit verify --key DEST/audit-key.pub DEST/audit.log`.

    Exit 0 written, 1 the log is broken (nothing written), 4 cannot run.
    """
    from snodo.state.audit_ops import export_log  # noqa: PLC0415 `audit --help` stays light

    try:
        log = _log(protocol_path)
        result = export_log(log, dest)
    except SnodoError as exc:
        if exc.exit_code != 1:
            exc.exit_code = 4
        raise
    command = f"snodo audit verify --key {result.key_file} {result.log_file}"
    if as_json:
        emit_json(
            {
                "path": str(log.path),
                "log": str(result.log_file),
                "key": str(result.key_file),
                "count": result.report.count,
                "verify": command,
            }
        )
        return
    console().print(f"exported {result.report.count} events to {result.log_file}")
    console().print(f"public key: {result.key_file}")
    console().print(f"anyone can check it offline: {command}", soft_wrap=True)


@audit.command("show")
@click.option("--event", "event", default=None, help="Only events of this name.")
@click.option("--last", "last", type=click.IntRange(min=1), default=None, help="Only the last N events.")
@project_options
def show_cmd(event: str | None, last: int | None, protocol_path: Path | None, as_json: bool) -> None:
    """Print audit events (oldest first; signed checkpoints only with --event checkpoint),
    each whole: long lines wrap, nothing is cut."""
    log = _log(protocol_path)
    records = log.records(event=event, last=last)
    if as_json:
        emit_json({"path": str(log.path), "events": records})
        return
    from rich.text import Text  # noqa: PLC0415 rich only for a person

    if not records:
        console().print(f"no matching events in {log.path}")
    for r in records:
        data = json.dumps(r["data"], sort_keys=True, ensure_ascii=False)
        console().print(
            Text.assemble(
                (f"{r['seq']:>5} {r['ts']} ", "dim"),
                (shown(str(r["event"]), multiline=False), "bold"),
                " ",
                (shown(str(r["mode"] or "-"), multiline=False), "cyan"),
                " ",
                shown(data),
            ),
            # no overflow named: piped, the console does not wrap, and an overflow would crop
        )


def _restarts(log: Any) -> list[dict[str, Any]]:
    """The ``audit_restarted`` lines of an intact log: each records a lost head."""
    return [
        {"line": r["seq"] + 1, "ts": r["ts"], **(r["data"] if isinstance(r["data"], dict) else {})}
        for r in log.records(event="audit_restarted")
    ]


@audit.command("restart")
@click.option("--reason", required=True, help="Why the old log is gone (recorded in the new log's first line).")
@click.option("--yes", is_flag=True, help="Do not ask for confirmation (needed when stdin is not a terminal).")
@project_options
@could_not_run
def restart_cmd(reason: str, yes: bool, protocol_path: Path | None, as_json: bool) -> None:
    """Start a new audit log after the old one was lost (git clean, a fresh clone, a deletion).

    Refused while the log is intact. The new log's first signed line records the lost head
    (as your home knew it) and REASON, so `snodo audit verify` and every export show the
    loss; what is left of the old file is kept as audit.log.lost-<time>. A person's act: no
    MCP tool runs it, and it is refused inside snodo's confinement.

    Exit 0 restarted, 4 cannot run (refused, nothing lost, no reason).
    """
    from snodo.state.audit_ops import restart_log  # noqa: PLC0415 `audit --help` stays light

    refuse_when_confined("snodo audit restart")
    log = _log(protocol_path)
    path = log.path
    if not yes:
        confirm(
            f"start a new audit log at {path}, recording that the old one was lost?",
            StateError("`snodo audit restart` asks a person to confirm", hint="run it in a terminal, or pass --yes"),
            err=False,
        )
    record = restart_log(log, reason)
    head = record["data"]["lost_head"]
    if as_json:
        emit_json({"path": str(path), "restarted": True, "lost_head": head, "reason": record["data"]["reason"]})
        return
    console().print(
        f"[green]restarted[/] {path}: its first signed line records the lost head (seq {head.get('seq')}, "
        f"hash {head.get('hash')}) and your reason; `snodo audit verify` shows it",
        soft_wrap=True,
    )
