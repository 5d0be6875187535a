"""``snodo doctor``: which sandbox backend confines agent code here, and why no other (docs/security.md)."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click
from attrs import asdict

from snodo.base.errors import EnvironmentProblem, SnodoError
from snodo.cli.common import json_option
from snodo.cli.output import console, emit_json
from snodo.mcp.hostconfig import HOSTS

if TYPE_CHECKING:
    from snodo.workspace.interpreter import ProjectPython


@click.command()
@click.option(
    "--host",
    "host",
    type=click.Choice(sorted(HOSTS)),
    default=None,
    help="Check an MCP host's config instead: is snodo connected, which host tools still write?",
)
@click.argument("config", required=False, type=click.Path(dir_okay=False, path_type=Path))
@json_option
def doctor(host: str | None, config: Path | None, as_json: bool) -> None:
    """Show which sandbox backend works here (each tried with a trivial confined process) and
    why each other one does not. Exits 1 when none works: every confined run then fails
    closed unless the protocol sets `execution: {sandbox: off}`.

    With --host HOST [CONFIG], read that host's config (default: where the host keeps it):
    is snodo connected as configured, which host tools still write to the project
    (docs/mcp-hosts.md)? Exits 1 when not connected.
    """
    if host is not None:
        _host_report(host, config, as_json)
        return
    from snodo.sandbox.choose import choose_backend, missing, statuses  # noqa: PLC0415 `doctor --help` stays light

    rows = statuses()
    python = _project_python()
    chosen: str | None = None
    problem: str | None = None
    try:
        chosen = choose_backend().name
    except EnvironmentProblem as exc:
        problem = str(exc)
    if as_json:
        emit_json(
            {
                "backend": chosen,
                "confined_execution": chosen is not None,
                "problem": problem,
                "backends": [{**asdict(r), "not_guaranteed": missing(r.name) if r.works else []} for r in rows],
                "python": asdict(python),
            }
        )
    else:
        _print_backends(rows, chosen, problem, python)
    if chosen is None:
        sys.exit(1)


def _print_backends(rows: list[Any], chosen: str | None, problem: str | None, python: ProjectPython) -> None:
    from rich.markup import escape  # noqa: PLC0415 rich only for a person

    from snodo.sandbox.choose import FORCE_ENV, missing  # noqa: PLC0415 `doctor --help` stays light

    out = console()
    for r in rows:
        mark = "[green]works[/]" if r.works else "[red]unavailable[/]"
        detail = f" ({escape(r.detail)})" if r.detail else ""
        reason = "" if r.works else f": {escape(r.reason)}"
        out.print(f"{r.name:<9} {mark}{detail}{reason}")
        for gap in missing(r.name) if r.works else ():
            out.print(f"          not guaranteed: {escape(gap)}")
    if chosen:
        out.print(f"confined execution uses [bold]{chosen}[/] (force one with {FORCE_ENV}=bwrap|landlock)")
    else:
        out.print(f"[bold red]no confinement here:[/] {escape(problem or '')}")
    out.print(f"project interpreter: {escape(python.describe())} (set execution.python to choose another)")


def _project_python() -> ProjectPython:
    from snodo.protocol import find_protocol, project_root_for, read_protocol_file  # noqa: PLC0415 `doctor --help` stays light
    from snodo.workspace.interpreter import project_python  # noqa: PLC0415 `doctor --help` stays light

    path = find_protocol(Path.cwd(), None)
    if not path.is_file():
        return project_python(Path.cwd())
    try:
        setting = read_protocol_file(path).execution.python
    except SnodoError:
        setting = None  # `snodo protocol check` reports a protocol that does not load
    return project_python(project_root_for(path), setting)


def _host_report(host: str, config: Path | None, as_json: bool) -> None:
    from snodo.mcp.hostcheck import check_host  # noqa: PLC0415 the MCP host check only with --host

    report = check_host(host, config)
    if as_json:
        emit_json(report.as_json())
    else:
        state = "connected as configured" if report.connected else "NOT connected"
        click.echo(f"{host} ({report.config}): snodo {state}")
        for problem in report.problems:
            click.echo(f"  problem: {problem}")
        for writer in report.open_writers:
            click.echo(f"  still writes to the project: {writer}")
        if not report.open_writers:
            click.echo("  the host's own write, edit and shell tools are closed")
    if not report.connected:
        sys.exit(1)
