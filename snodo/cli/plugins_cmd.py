"""``snodo plugins``: every plugin, its distribution, version, hooks and registrations."""

from __future__ import annotations

import click

from snodo.cli.common import json_option


@click.command()
@json_option
def plugins(as_json: bool) -> None:
    """List plugins loaded from the `snodo` entry points, with what each registers.

    A plugin that failed to load is listed with its error; the others keep working.
    """
    from snodo.cli.output import console, emit_json
    from snodo.plugin.host import get_plugin_manager

    host = get_plugin_manager()
    infos = host.info()
    coders = host.coders()
    validators = host.validators()
    if as_json:
        rows = []
        for info in infos:
            row = info.as_json()
            row["capabilities"] = {name: _coder_caps(coders[name]) for name in info.coders if name in coders}
            row["validator_specs"] = {
                name: {
                    "needs_model": validators[name].needs_model,
                    "deterministic": validators[name].deterministic,
                    "settings": list(validators[name].settings),
                    "description": validators[name].description,
                }
                for name in info.validators
                if name in validators
            }
            rows.append(row)
        emit_json({"plugins": rows})
        return
    from rich.padding import Padding
    from rich.text import Text

    from snodo.cli.output import key_values

    for info in infos:
        regs = []
        for name in info.coders:
            caps = coders[name].capabilities
            flags = [
                k
                for k in ("writes_in_place", "commits_own_changes", "needs_network", "deterministic")
                if getattr(caps, k)
            ]
            needs = [p.name for p in caps.required_programs]
            regs.append(
                f"coder {name}"
                + (f" [{', '.join(flags)}]" if flags else "")
                + (f" needs {', '.join(needs)}" if needs else "")
            )
        regs += [f"validator {n}" + (" [model]" if validators[n].needs_model else "") for n in info.validators]
        regs += [f"predicate {n}" for n in info.predicates]
        dist = f"{info.distribution or '-'} {info.version or ''}".strip()
        head = Text.assemble((info.name, "bold"), f"  ({dist})  ")
        head.append("ok" if info.status == "ok" else "failed", style="green" if info.status == "ok" else "red")
        console().print(head)
        fields: list[tuple[str, Text]] = []
        if info.status != "ok":
            fields.append(("error", Text(str(info.error))))
        if regs:
            fields.append(("registers", Text("\n".join(regs))))
        if info.hooks:
            fields.append(("hooks", Text(", ".join(info.hooks))))
        console().print(Padding(key_values(fields), (0, 0, 0, 2), expand=False))


def _coder_caps(spec: object) -> dict[str, object]:
    caps = spec.capabilities  # type: ignore[attr-defined]
    return {
        "writes_in_place": caps.writes_in_place,
        "commits_own_changes": caps.commits_own_changes,
        "needs_network": caps.needs_network,
        "deterministic": caps.deterministic,
        "required_programs": [{"name": p.name, "install_hint": p.install_hint} for p in caps.required_programs],
        "settings": list(caps.settings),
    }
