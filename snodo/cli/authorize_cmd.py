"""``snodo authorize``: the out-of-band human route for escalations (docs/protocol.md).

Without an id it lists pending decisions. With one it renders the STORED proposal (never
text from the command line), asks for confirmation, signs a DecisionRecord with the user's
Ed25519 key and removes the pending entry. A proposal with a blocker cannot be signed (INV3).
This module is the only command that imports the private-key code.
"""

from __future__ import annotations

import getpass
import socket
import sys
from pathlib import Path
from typing import Any, Literal

import click

from snodo.cli.common import json_option, project_root, protocol_option
from snodo.errors import DecisionError


def _pending_json(session_id: str, p: Any) -> dict[str, Any]:
    return {
        "decision_id": p.decision_id,
        "session_id": session_id,
        "task_id": p.task_id,
        "mode": p.mode,
        "phase": p.phase,
        "created_at": p.created_at,
        "spec_sha256": p.spec_sha256,
        "spec": p.spec_text,
        "results": list(p.results),
        "policy": p.policy,
        "warned_validators": list(p.warned_validators()),
        "authorizable": not p.blocking_validators(),
    }


def _with_proposals(root: Path, row: dict[str, Any]) -> dict[str, Any]:
    row["agent_proposals"] = _proposals(root, row["decision_id"])
    return row


@click.command()
@click.argument("decision_id", required=False)
@click.option("--yes", is_flag=True, help="Do not ask for confirmation.")
@click.option("--reject", is_flag=True, help="Record a rejection instead of an approval.")
@click.option("--justification", "-m", default="", help="Why you decided so (recorded and signed).")
@protocol_option
@json_option
def authorize(
    decision_id: str | None, yes: bool, reject: bool, justification: str, protocol_path: Path | None, as_json: bool
) -> None:
    """List pending decisions, or sign DECISION_ID after reviewing the stored proposal.

    An approval makes the adjudicated warns count as passes for exactly that task and spec;
    validate (or `snodo run --resume`) again afterwards. Blockers can never be authorised.
    """
    from snodo.cli.output import console, emit_json
    from snodo.state.home import snodo_home
    from snodo.state.sessions import SessionStore

    root = project_root(protocol_path)
    home = snodo_home()
    store = SessionStore(home)
    if decision_id is None:
        pending = store.pending(root)
        if as_json:
            emit_json(
                {
                    "project": str(root),
                    "pending": [_with_proposals(root, _pending_json(s.session_id, p)) for s, p in pending],
                }
            )
            return
        if not pending:
            console().print(f"no pending decisions for {root}")
            return
        from snodo.cli.output import listing, printable

        rows = [
            (
                p.decision_id,
                p.task_id,
                f"{p.mode} / {p.phase}",
                ", ".join(p.warned_validators()),
                p.created_at,
                printable(p.spec_text.strip().splitlines()[0]) if p.spec_text.strip() else "",
            )
            for _s, p in pending
        ]
        console().print(f"pending decisions — {root}", markup=False)
        console().print(
            listing(
                ("decision_id", "task", "mode / phase", "warned", "created", "spec"),
                rows,
                keep_whole=("decision_id", "task"),
            )
        )
        console().print("review one with `snodo authorize DECISION_ID`")
        return

    from snodo.authorize_signing import sign_decision
    from snodo.state.audit import AuditLog
    from snodo.state.decisions import DecisionStore, check_inv3, draft_decision

    session, pending_decision = store.find_pending(decision_id, root)
    if not as_json:
        _render(pending_decision)
        _render_proposals(root, decision_id)
    try:
        check_inv3(pending_decision)
    except DecisionError:
        AuditLog(root / ".snodo" / "audit.log").append(
            "decision_refused",
            mode=pending_decision.mode,
            data={
                "decision_id": decision_id,
                "task_id": pending_decision.task_id,
                "reason": "the proposal contains a blocker or a validator error",
            },
        )
        raise
    verdict: Literal["approve", "reject"] = "reject" if reject else "approve"
    if not yes:
        if not sys.stdin.isatty():
            raise DecisionError(
                f"decision {decision_id} needs a confirmation, and there is no terminal to ask on",
                hint="review it with `snodo authorize DECISION_ID` in a terminal, or pass --yes",
            )
        click.confirm(f"{verdict.upper()} decision {decision_id}?", abort=True, err=True)
    record = draft_decision(
        pending_decision,
        decision=verdict,
        justification=justification or f"{verdict}d with snodo authorize",
        decided_by=f"{getpass.getuser()}@{socket.gethostname()}",
    )
    signed = sign_decision(home, record, pending_decision)
    path = DecisionStore(root, home).save(signed)
    store.remove_pending(session.session_id, decision_id)
    AuditLog(root / ".snodo" / "audit.log").append(
        "decision_recorded",
        mode=pending_decision.mode,
        data={
            "decision_id": decision_id,
            "task_id": signed.task_id,
            "spec_sha256": signed.spec_sha256,
            "decision": verdict,
            "adjudicated_validators": list(signed.adjudicated_validators),
            "decided_by": signed.decided_by,
            "key": signed.public_key_fingerprint,
            "record": str(path),
        },
    )
    if as_json:
        emit_json(
            {
                "decision_id": decision_id,
                "decision": verdict,
                "record": str(path),
                "task_id": signed.task_id,
                "adjudicated_validators": list(signed.adjudicated_validators),
            }
        )
    else:
        console().print(f"[green]recorded[/] {verdict} for {decision_id} → {path}")
        console().print(
            f"next: validate the same task again, or if a run halted on it: `snodo run --resume {signed.task_id}`"
        )


def _proposals(root: Path, decision_id: str) -> list[dict[str, Any]]:
    """Agents' proposals for a decision (``propose_adjudicate``); advice, never authority."""
    import json

    found = []
    for path in sorted((root / ".snodo" / "proposals").glob(f"{decision_id}-*.json")):
        try:
            found.append(json.loads(path.read_text(encoding="utf-8")))
        except (OSError, ValueError):
            continue
    return found


def _render_proposals(root: Path, decision_id: str) -> None:
    from rich.text import Text

    from snodo.cli.output import console, printable

    for prop in _proposals(root, decision_id):
        who, when = printable(str(prop.get("proposed_by"))), printable(str(prop.get("proposed_at")))
        console().print(
            Text(
                f"agent proposal ({who}, {when}): "
                f"{printable(str(prop.get('decision')))} — {printable(str(prop.get('justification')))} "
                "(advice only; it authorises nothing)",
                style="dim",
            )
        )


def _render(p: Any) -> None:
    from rich.panel import Panel
    from rich.text import Text

    from snodo.cli.output import console, printable, results_table

    console().print(f"task {p.task_id} — the spec as validated:", markup=False)
    console().print(Panel(Text(printable(p.spec_text.strip()))))
    console().print(f"decision {p.decision_id} — {p.mode} / {p.phase}", markup=False, style="bold")
    console().print(results_table(list(p.results), with_type=True))
    pol = p.policy
    console().print(
        f"policy {pol.get('name')}: {pol.get('pass_count')}/{pol.get('total')} passed, "
        f"{pol.get('required')} required; a human decides on: {', '.join(p.warned_validators())}",
        markup=False,
    )
