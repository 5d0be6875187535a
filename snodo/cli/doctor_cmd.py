"""``snodo doctor``: which sandbox backend confines agent-written code here, and why the
others do not (docs/security.md)."""

from __future__ import annotations

import sys
from pathlib import Path

import click

from snodo.cli.common import json_option

HOST_NAMES = ("opencode", "codex", "claude-code", "claude-desktop", "cursor", "vscode", "generic")


@click.command()
@click.option(
    "--host",
    "host",
    type=click.Choice(sorted(HOST_NAMES)),
    default=None,
    help="Check an MCP host's config instead: is snodo connected, which host tools still write?",
)
@click.argument("config", required=False, type=click.Path(dir_okay=False, path_type=Path))
@json_option
def doctor(host: str | None, config: Path | None, as_json: bool) -> None:
    """Show which sandbox backend works here and why each other one does not.

    Each backend is tried by starting a trivial confined process. Exits 1 when none works:
    then every confined run fails closed (environment_error) unless the protocol sets
    `execution: {sandbox: off}`.

    With --host HOST [CONFIG], read that host's config instead (default: where the host keeps
    it) and say whether snodo is connected as configured and which of the host's own tools
    still write to the project (docs/mcp-hosts.md). Exits 1 when not connected.
    """
    if host is not None:
        _host_report(host, config, as_json)
        return
    from snodo.errors import EnvironmentProblem
    from snodo.sandbox import FORCE_ENV, choose_backend, statuses

    rows = statuses()
    chosen: str | None = None
    problem: str | None = None
    try:
        chosen = choose_backend().name
    except EnvironmentProblem as exc:
        problem = str(exc)
    if as_json:
        from snodo.cli.output import emit_json

        emit_json(
            {
                "backend": chosen,
                "confined_execution": chosen is not None,
                "problem": problem,
                "backends": [{"name": r.name, "works": r.works, "reason": r.reason, "detail": r.detail} for r in rows],
            }
        )
    else:
        from rich.markup import escape

        from snodo.cli.output import console

        out = console()
        for r in rows:
            mark = "[green]works[/]" if r.works else "[red]unavailable[/]"
            detail = f" ({escape(r.detail)})" if r.detail else ""
            reason = "" if r.works else f": {escape(r.reason)}"
            out.print(f"{r.name:<9} {mark}{detail}{reason}")
        if chosen:
            out.print(f"confined execution uses [bold]{chosen}[/] (force one with {FORCE_ENV}=bwrap|landlock)")
        else:
            out.print(f"[bold red]no confinement here:[/] {escape(problem or '')}")
    if chosen is None:
        sys.exit(1)


def _host_report(host: str, config: Path | None, as_json: bool) -> None:
    from snodo.mcp.hostcheck import check_host

    report = check_host(host, config)
    if as_json:
        from snodo.cli.output import emit_json

        emit_json(report.as_json())
    else:
        from snodo.cli.output import console

        out = console()
        state = "connected as configured" if report.connected else "NOT connected"
        out.print(f"{host} ({report.config}): snodo {state}", markup=False)
        for problem in report.problems:
            out.print(f"  problem: {problem}", markup=False)
        for writer in report.open_writers:
            out.print(f"  still writes to the project: {writer}", markup=False)
        if not report.open_writers:
            out.print("  the host's own write, edit and shell tools are closed", markup=False)
    if not report.connected:
        sys.exit(1)
