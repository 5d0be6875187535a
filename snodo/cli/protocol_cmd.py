"""``snodo protocol check``: strict loading plus WF1–WF5, every violation at once."""

from __future__ import annotations

from pathlib import Path

import click

from snodo.cli.common import json_option
from snodo.errors import ProtocolError

_HINT = "docs/protocol.md explains each rule (WF1–WF5) and every field"


@click.group()
def protocol() -> None:
    """Inspect the protocol."""


@protocol.command("check")
@click.argument("path", required=False, type=click.Path(dir_okay=False, path_type=Path))
@json_option
def check_cmd(path: Path | None, as_json: bool) -> None:
    """Check PATH (default: the nearest .snodo/protocol.yml) and report every violation.

    Exit 0 when well-formed (warnings go to stderr), 1 when refused, 4 when there is no
    protocol file to check. Nothing is written.
    """
    from snodo.cli.output import console, emit_json, print_note, print_warning
    from snodo.plugins import get_plugin_manager
    from snodo.protocol import check, find_protocol, located, read_protocol_file

    target = find_protocol(Path.cwd(), path)
    host = get_plugin_manager()
    try:
        proto = read_protocol_file(target)
    except ProtocolError as exc:
        exc.exit_code = 1 if target.is_file() else 4  # refused, or nothing to check
        if as_json and exc.exit_code == 1:
            emit_json(
                {
                    "path": str(target),
                    "ok": False,
                    "errors": list(exc.problems or (exc.message,)),
                    "warnings": [],
                    "error": exc.message,
                    "hint": f"{exc.hint}; {_HINT}" if exc.hint else _HINT,
                    "exit_code": 1,
                }
            )
            raise SystemExit(1) from None
        raise
    violations = located(check(proto, host), target.read_text(encoding="utf-8"), str(target))
    from snodo.sandbox.guarantees import here

    backend, gaps = here() if proto.execution.sandbox == "auto" else (None, [])
    in_force = _in_force(target)
    errors = [v for v in violations if v.level == "error"]
    warnings = [v for v in violations if v.level == "warning"]
    if as_json:
        emit_json(
            {
                "path": str(target),
                "ok": not errors,
                "protocol_id": proto.protocol_id,
                "errors": [v.as_json() for v in errors],
                "warnings": [v.as_json() for v in warnings],
                "confinement": {"backend": backend, "not_guaranteed": gaps},
                "in_force": in_force,
                **(
                    {"error": f"{target}: the protocol is not well-formed", "hint": _HINT, "exit_code": 1}
                    if errors
                    else {}
                ),
            }
        )
    else:
        for w in warnings:
            print_warning(str(w))
        for gap in gaps:
            print_note(f"confinement ({backend or 'none'}) does not guarantee: {gap}")
        for line in filter(None, (in_force.get("warning"), in_force.get("not_in_force"), in_force.get("drift"))):
            (print_note if line == in_force.get("warning") else print_warning)(str(line))
        for who, err in host.failures():
            print_warning(f"{who} was not loaded: {err}")
        if errors:
            refused = ProtocolError(
                f"{target}: the protocol is not well-formed ({len(errors)} violation{'s' * (len(errors) != 1)})",
                problems=tuple(str(v) for v in errors),
                hint=_HINT,
            )
            refused.exit_code = 1
            raise refused
        modes = ", ".join(m.mode_id for m in proto.modes)
        console().print(f"[green]ok[/] {target}: protocol {proto.protocol_id!r} is well-formed (modes: {modes})")
    if errors:
        raise SystemExit(1)


def _in_force(target: Path) -> dict[str, str | None]:
    """How the checked file relates to the protocol in force (the committed one): the drift
    that ``serve`` and ``run`` would refuse, shown here so it is fixed before."""
    from snodo.errors import SnodoError
    from snodo.protocol.committed import resolve

    try:
        state = resolve(target)
    except SnodoError as exc:
        return {"error": exc.message}
    return {
        "commit": state.commit,
        "sha256": state.digest,
        "drift": state.drift,
        "not_in_force": state.not_in_force,
        "warning": state.warning,
    }
