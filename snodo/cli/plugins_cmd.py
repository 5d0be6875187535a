"""``snodo plugins``: every plugin, its distribution, version, hooks and registrations."""

from __future__ import annotations

from typing import Any

import click

from snodo.cli.common import json_option
from snodo.cli.output import console, emit_json, key_values


@click.command()
@json_option
def plugins(as_json: bool) -> None:
    """List plugins loaded from the `snodo` entry points, with what each registers.

    A plugin that failed to load is listed with its error; the others keep working.
    """
    from snodo.plugin.host import get_plugin_manager  # noqa: PLC0415 `plugins --help` stays light

    host = get_plugin_manager()
    infos = host.info()
    coders = host.coders()
    validators = host.validators()
    if as_json:
        emit_json({"plugins": [_plugin_json(info, coders, validators) for info in infos]})
        return
    for info in infos:
        _print_plugin(info, _registrations(info, coders, validators))


def _print_plugin(info: Any, regs: list[str]) -> None:
    from rich.padding import Padding  # noqa: PLC0415 rich only for a person
    from rich.text import Text  # noqa: PLC0415 rich only for a person

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


#: A coder's yes/no capabilities, as listed and as told in JSON.
CODER_FLAGS = ("writes_in_place", "commits_own_changes", "needs_network", "deterministic")


def _coder_caps(spec: object) -> dict[str, object]:
    caps = spec.capabilities  # type: ignore[attr-defined]
    return {
        **{flag: getattr(caps, flag) for flag in CODER_FLAGS},
        "required_programs": [{"name": p.name, "install_hint": p.install_hint} for p in caps.required_programs],
        "settings": list(caps.settings),
    }


def _plugin_json(info: Any, coders: dict[str, Any], validators: dict[str, Any]) -> dict[str, Any]:
    row: dict[str, Any] = info.as_json()
    row["capabilities"] = {name: _coder_caps(coders[name]) for name in info.coders if name in coders}
    row["validator_specs"] = {name: _validator_spec(validators[name]) for name in info.validators if name in validators}
    return row


def _validator_spec(spec: Any) -> dict[str, object]:
    return {
        "needs_model": spec.needs_model,
        "deterministic": spec.deterministic,
        "settings": list(spec.settings),
        "description": spec.description,
    }


def _registrations(info: Any, coders: dict[str, Any], validators: dict[str, Any]) -> list[str]:
    """What ``info``'s plugin registers, one line each, with the flags a person chooses by."""
    regs = []
    for name in info.coders:
        caps = coders[name].capabilities
        flags = [flag for flag in CODER_FLAGS if getattr(caps, flag)]
        needs = [p.name for p in caps.required_programs]
        regs.append(
            f"coder {name}"
            + (f" [{', '.join(flags)}]" if flags else "")
            + (f" needs {', '.join(needs)}" if needs else "")
        )
    regs += [f"validator {n}" + (" [model]" if validators[n].needs_model else "") for n in info.validators]
    return regs + [f"predicate {n}" for n in info.predicates]
