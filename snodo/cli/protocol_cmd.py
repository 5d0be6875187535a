"""``snodo protocol check``: strict loading plus WF1–WF5, every violation at once; ``snodo
protocol sign``: a person's signed commit of ``.snodo/``, which puts it in force."""

from __future__ import annotations

from pathlib import Path
from typing import Any, NoReturn

import click

from snodo.base.errors import ProtocolError, SnodoError, StateError
from snodo.base.text import shown
from snodo.cli.common import confirm, could_not_run, json_option, refuse_when_confined
from snodo.cli.output import console, emit_json, print_note, print_warning
from snodo.git.runner import pin
from snodo.state.home import snodo_home

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
    from snodo.plugin.host import get_plugin_manager  # noqa: PLC0415 the plugin host only for `protocol check`
    from snodo.protocol import find_protocol  # noqa: PLC0415 `protocol --help` stays light

    target = find_protocol(Path.cwd(), path)
    host = get_plugin_manager()
    proto, violations = _read(target, host, as_json)
    errors = [v for v in violations if v.level == "error"]
    warnings = [v for v in violations if v.level == "warning"]
    if not as_json:
        _report_check(target, proto, host, errors, warnings)
        return
    backend, gaps = _confinement(proto)
    emit_json(
        {
            "path": str(target),
            "ok": not errors,
            "protocol_id": proto.protocol_id,
            "errors": [v.as_json() for v in errors],
            "warnings": [v.as_json() for v in warnings],
            "confinement": {"backend": backend, "not_guaranteed": gaps},
            "in_force": _in_force(target),
            **(
                {"error": f"{target}: the protocol is not well-formed", "hint": _HINT, "exit_code": 1} if errors else {}
            ),
        }
    )
    if errors:
        raise SystemExit(1)


def _confinement(proto: Any) -> tuple[str | None, list[str]]:
    """The sandbox backend ``auto`` gets here, and what it does not guarantee."""
    from snodo.sandbox.choose import here  # noqa: PLC0415 the sandbox probes only for `protocol check`

    return here() if proto.execution.sandbox == "auto" else (None, [])


def _read(target: Path, host: Any, as_json: bool) -> tuple[Any, list[Any]]:
    """The protocol at ``target``, read strictly, and its violations: exit 1 (``--json``: the
    check's shape) when it does not load, 4 when there is no file."""
    from snodo.protocol import check_file  # noqa: PLC0415 `protocol --help` stays light

    try:
        return check_file(target, host)
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


def _report_check(target: Path, proto: Any, host: Any, errors: list[Any], warnings: list[Any]) -> None:
    backend, gaps = _confinement(proto)
    in_force = _in_force(target)
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


def _in_force(target: Path) -> dict[str, str | None]:
    """The checked file against the protocol in force: the drift ``serve`` and ``run`` refuse."""
    from snodo.protocol.committed import resolve  # noqa: PLC0415 `protocol --help` stays light

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


@protocol.command("sign")
@click.option("-m", "--message", default=None, help="The commit message (default: says what is signed).")
@click.option("--yes", is_flag=True, help="Do not ask for confirmation (for scripts that already reviewed it).")
@json_option
@could_not_run
def sign_cmd(message: str | None, yes: bool, as_json: bool) -> None:
    """Commit the working tree's .snodo/ signed with your decision key, putting it in force.

    Only .snodo/ is committed (what else you staged stays staged), with git's own SSH
    signature (namespace git): no git signing setup, and `git verify-commit` checks it against
    .snodo/allowed_signers. Your key must be in the allowed_signers in force (for the first
    list, in that list: `snodo keys show > .snodo/allowed_signers`). An unsigned .snodo/
    change already committed is adopted by an empty signed commit. A person's command: it
    asks on a terminal (--yes skips that) and is refused inside snodo's confinement.

    Exit 0 signed (or nothing to sign), 4 refused or could not run.
    """
    from snodo.cli.signing import ask_passphrase, sign_ssh  # noqa: PLC0415 the private-key code only for a signing command (tests/test_boundaries.py)
    from snodo.protocol import sign  # noqa: PLC0415 `protocol --help` stays light
    from snodo.state.keys import ensure_decision_keys  # noqa: PLC0415 the key code only for `protocol sign`
    from snodo.state.runtime import LEGACY_RUNTIME  # noqa: PLC0415 the key code only for `protocol sign`

    refuse_when_confined("snodo protocol sign")
    found = pin(Path.cwd())
    if found is None:
        raise StateError(f"{Path.cwd()} is not in a git repository", hint="run it in your project's checkout")
    top = found.work_tree
    home = snodo_home()
    raw = ensure_decision_keys(home).public_bytes_raw()
    planned = sign.plan(top, runtime=LEGACY_RUNTIME)
    if planned.nothing_to_do:
        what = "no change under .snodo/ to sign, and the .snodo/ at HEAD is in force"
        if as_json:
            emit_json({"signed": False, "commit": None, "reason": what})
        else:
            click.echo(what, err=True)
        return
    signer = _listed_as(planned, raw)
    if not yes:
        _confirm_signing(planned, signer)
    text = message or (
        "snodo: sign .snodo/"
        if planned.changes
        else f"snodo: adopt .snodo/ of {str(planned.parent)[:12]}, signed by {signer}"
    )
    passphrase = ask_passphrase(home)  # asked once, before git runs
    new = sign.commit(planned, text, lambda payload: sign_ssh(home, payload, "git", passphrase=passphrase))
    _check_in_force(top, new)
    if as_json:
        emit_json({"signed": True, "commit": new, "signed_by": signer, "adopted": bool(planned.adopting)})
        return
    click.echo(new)
    click.echo(
        f"signed {new[:12]} as {signer}: the .snodo/ at HEAD is in force (`git verify-commit HEAD` checks it "
        "with gpg.ssh.allowedSignersFile=.snodo/allowed_signers)",
        err=True,
    )


def _check_in_force(top: Path, new: str) -> None:
    from snodo.protocol.trust import Walk  # noqa: PLC0415 `protocol --help` stays light

    walk = Walk(top, [new], None)
    refused = walk.pending(new)
    if refused is not None or walk.after(new).tree != walk.trees[new]:
        raise StateError(
            f"commit {new[:12]} is made, but git does not accept its signature, so .snodo/ is not in force"
            + (f": {refused.why}" if refused is not None else ""),
            hint="check that ssh-keygen is installed (git verifies SSH signatures with it)",
        )


def _listed_as(planned: Any, raw: bytes) -> str:
    """The name the deciding list gives the decision key for namespace git; else why a commit
    signed with it would not put .snodo/ in force, and what to do."""
    from snodo.protocol.trust import GOVERNANCE_DIR  # noqa: PLC0415 `protocol --help` stays light
    from snodo.state.signers import parse_allowed_signers  # noqa: PLC0415 the key code only for `protocol sign`

    entries = parse_allowed_signers(planned.signers or "", f"{GOVERNANCE_DIR}/allowed_signers")
    mine = [s for s in entries if s.key is not None and s.key.public_bytes_raw() == raw]
    listed = [s.name for s in mine if s.allows("git")]
    if listed:
        return listed[0]
    _refuse_unlisted(planned, listed_for_another_namespace=bool(mine))


def _refuse_unlisted(planned: Any, *, listed_for_another_namespace: bool) -> NoReturn:
    where = "the first allowed_signers (the one being signed)" if planned.first_list else "the list in force"
    if planned.signers is None:
        why, hint = (
            "there is no .snodo/allowed_signers: nobody would be trusted",
            "`snodo keys show > .snodo/allowed_signers` lists your keys as the first one, then sign again",
        )
    elif listed_for_another_namespace:
        why = f"your decision key is listed in {where}, but not for namespace git (signed commits)"
        hint = 'put the line `snodo keys show` prints now (namespaces="snodo-decision,git") in its place' + (
            ", then sign again" if planned.first_list else ", in a change a listed principal signs"
        )
    else:
        why = f"your decision key is not listed in {where}"
        hint = (
            "`snodo keys show >> .snodo/allowed_signers` adds your lines, then sign again"
            if planned.first_list
            else "a principal listed in the allowed_signers in force must sign (or add your key in a "
            "change they sign); or restore the home whose keys are listed"
        )
    raise StateError(f"{why}, so a commit signed with it would not put .snodo/ in force", hint=hint)


def _confirm_signing(planned: Any, signer: str) -> None:
    adopt_note = f"adopting the .snodo/ committed at HEAD: {planned.adopting}" if planned.adopting else ""
    summary = "\n".join(f"  {shown(c)}" for c in planned.changes) or f"  {adopt_note}"
    confirm(
        f"sign as {signer} and commit:\n{summary}\nsign this .snodo/ with your decision key and put it in force?",
        StateError(
            "`snodo protocol sign` asks a person to confirm, and there is no terminal to ask on",
            hint="run it in a terminal, or pass --yes",
        ),
    )
