"""``snodo authorize``: the out-of-band human route for escalations (docs/protocol.md). All
agent-writable text shown goes through :func:`~snodo.base.text.shown`: an agent must not
repaint the screen a person reads right before the y/N prompt."""

from __future__ import annotations

import getpass
import socket
from pathlib import Path
from typing import Any, Literal

import click

from snodo.base.errors import DecisionError
from snodo.base.text import shown
from snodo.cli.common import audit_event, confirm, project_options, project_root, signers_in_force
from snodo.cli.output import console, emit_json, listing, results_table
from snodo.state.home import snodo_home


def _pending_json(root: Path, session_id: str, p: Any) -> dict[str, Any]:
    from snodo.state.atomic import unstructure  # noqa: PLC0415 `authorize --help` stays light
    from snodo.state.proposals import ProposalStore, Unreadable  # noqa: PLC0415 `authorize --help` stays light

    return {
        "decision_id": p.decision_id,
        "session_id": session_id,
        "task_id": p.task_id,
        "mode": p.mode,
        "phase": p.phase,
        "created_at": p.created_at,
        "spec_sha256": p.spec_sha256,
        "tree": p.tree or None,
        "spec": p.spec_text,
        "results": list(p.results),
        "policy": p.policy,
        "warned_validators": list(p.warned_validators()),
        "authorizable": not p.blocking_validators(),
        "agent_proposals": [
            {"unreadable": str(prop.path), "reason": prop.reason} if isinstance(prop, Unreadable) else unstructure(prop)
            for prop in ProposalStore(root).for_decision(p.decision_id)
        ],
    }


@click.command()
@click.argument("decision_id", required=False)
@click.option("--yes", is_flag=True, help="Do not ask for confirmation.")
@click.option("--reject", is_flag=True, help="Record a rejection instead of an approval.")
@click.option("--justification", "-m", default="", help="Why you decided so (recorded and signed).")
@click.option("--prune", is_flag=True, help="Drop pending decisions that no longer apply (decided or superseded).")
@project_options
def authorize(
    decision_id: str | None,
    yes: bool,
    reject: bool,
    justification: str,
    prune: bool,
    protocol_path: Path | None,
    as_json: bool,
) -> None:
    """List pending decisions, or sign DECISION_ID after reviewing the stored proposal.

    An approval makes the adjudicated warns count as passes for exactly that task and spec
    (and, after execution, exactly the reviewed git tree); validate (or `snodo run
    --resume`) again afterwards. Blockers can never be authorised.
    """
    from snodo.state.sessions import SessionStore  # noqa: PLC0415 `authorize --help` stays light

    root = project_root(protocol_path)
    home = snodo_home()
    store = SessionStore(home)
    if prune:
        if decision_id is not None:
            raise click.UsageError("--prune takes no DECISION_ID")
        _prune(root, home, store, signers_in_force(protocol_path), as_json)
        return
    if decision_id is None:
        _list_pending(root, store, as_json)
        return
    session, pending_decision = store.find_pending(decision_id, root)
    if not as_json:
        _render(root, pending_decision)
    _refuse_unless_inv3(root, decision_id, pending_decision)
    verdict: Literal["approve", "reject"] = "reject" if reject else "approve"
    if not yes:
        confirm(
            f"{verdict.upper()} decision {decision_id}?",
            DecisionError(
                f"decision {decision_id} needs a confirmation, and there is no terminal to ask on",
                hint="review it with `snodo authorize DECISION_ID` in a terminal, or pass --yes",
            ),
        )
    signed, path = _sign_and_record(root, home, pending_decision, verdict, justification)
    store.remove_pending(session.session_id, decision_id)
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
        return
    console().print(f"[green]recorded[/] {verdict} for {decision_id} → {path}")
    console().print(
        f"next: validate the same task again, or if a run halted on it: `snodo run --resume {signed.task_id}`"
    )


def _list_pending(root: Path, store: Any, as_json: bool) -> None:
    pending = store.pending(root)
    if as_json:
        emit_json({"project": str(root), "pending": [_pending_json(root, s.session_id, p) for s, p in pending]})
        return
    if not pending:
        console().print(f"no pending decisions for {root}")
        return
    rows = [
        (
            p.decision_id,
            p.task_id,
            f"{p.mode} / {p.phase}",
            ", ".join(p.warned_validators()),
            p.created_at,
            shown(p.spec_text.strip().splitlines()[0]) if p.spec_text.strip() else "",
        )
        for _s, p in pending
    ]
    columns = ("decision_id", "task", "mode / phase", "warned", "created", "spec")
    console().print(f"pending decisions — {root}", markup=False)
    console().print(listing(columns, rows, keep_whole=("decision_id", "task")))
    console().print("review one with `snodo authorize DECISION_ID`")


def _refuse_unless_inv3(root: Path, decision_id: str, pending_decision: Any) -> None:
    """INV3: a proposal holding a blocker or a validator error is refused, and that audited."""
    from snodo.state.decisions import check_inv3  # noqa: PLC0415 `authorize --help` stays light

    try:
        check_inv3(pending_decision)
    except DecisionError as refused:
        refused.exit_code = 1  # refused by governance (INV3), not a failure to run
        audit_event(
            root,
            "decision_refused",
            mode=pending_decision.mode,
            data={
                "decision_id": decision_id,
                "task_id": pending_decision.task_id,
                "reason": "the proposal contains a blocker or a validator error",
            },
        )
        raise


def _sign_and_record(
    root: Path, home: Path, pending_decision: Any, verdict: Literal["approve", "reject"], justification: str
) -> tuple[Any, Path]:
    from snodo.cli.signing import ask_passphrase, sign_decision  # noqa: PLC0415 the signing code only when a decision is signed
    from snodo.state.decisions import DecisionStore, draft_decision  # noqa: PLC0415 `authorize --help` stays light

    record = draft_decision(
        pending_decision,
        decision=verdict,
        justification=justification or f"{verdict}d with snodo authorize",
        decided_by=f"{getpass.getuser()}@{socket.gethostname()}",
    )
    signed = sign_decision(home, record, pending_decision, passphrase=ask_passphrase(home))
    path = DecisionStore(root, home, signers=None).save(signed)  # storing: no trust asked
    audit_event(
        root,
        "decision_recorded",
        mode=pending_decision.mode,
        data={
            "decision_id": signed.decision_id,
            "task_id": signed.task_id,
            "spec_sha256": signed.spec_sha256,
            **({"tree": signed.tree} if signed.tree else {}),
            "decision": verdict,
            "adjudicated_validators": list(signed.adjudicated_validators),
            "decided_by": signed.decided_by,
            "key": signed.public_key_fingerprint,
            "record": str(path),
        },
    )
    return signed, path


def _render(root: Path, p: Any) -> None:
    from rich.panel import Panel  # noqa: PLC0415 rich only for a person
    from rich.text import Text  # noqa: PLC0415 rich only for a person

    from snodo.state.proposals import ProposalStore, Unreadable  # noqa: PLC0415 `authorize --help` stays light

    console().print(f"task {shown(p.task_id)} — the spec as validated:", markup=False)
    console().print(Panel(Text(shown(p.spec_text.strip()))))
    if p.tree:
        console().print(f"judged git tree: {shown(p.tree)} (the decision applies to exactly this tree)", markup=False)
    console().print(f"decision {shown(p.decision_id)} — {shown(p.mode)} / {shown(p.phase)}", markup=False, style="bold")
    console().print(results_table(list(p.results), with_type=True))
    _render_escalations(p.results)
    pol = p.policy
    console().print(
        shown(
            f"policy {pol.get('name')}: {pol.get('pass_count')}/{pol.get('total')} passed, "
            f"{pol.get('required')} required; a human decides on: {', '.join(p.warned_validators())}"
        ),
        markup=False,
    )
    for prop in ProposalStore(root).for_decision(p.decision_id):
        if isinstance(prop, Unreadable):
            console().print(Text(f"unreadable proposal {shown(str(prop.path))}: {shown(prop.reason)}", style="yellow"))
            continue
        console().print(
            Text(
                f"agent proposal ({shown(prop.proposed_by)}, {shown(prop.proposed_at)}): "
                f"{shown(prop.decision)} — {shown(prop.justification)} "
                "(advice only; it authorises nothing)",
                style="dim",
            )
        )


#: How many lines of the changes to the tests and their harness are shown, over all of them.
SHOWN_DIFF_LINES = 400


def _render_escalations(results: Any) -> None:
    """Each escalation the judge reported on the tests or their harness, with its diff, bounded and escaped."""
    budget = SHOWN_DIFF_LINES
    for r in results:
        details = r.get("details") if isinstance(r, dict) else None
        escalations = details.get("escalations") if isinstance(details, dict) else None
        if not isinstance(escalations, list) or not escalations:
            continue
        console().print(
            f"{shown(str(r.get('validator_id')))}: what the change does to the tests", markup=False, style="bold"
        )
        for item in filter(lambda item: isinstance(item, dict), escalations):
            console().print(f"- {shown(str(item.get('what')))}", markup=False)
            budget = _render_diff(shown(str(item.get("shown") or "")).splitlines(), budget)


def _render_diff(lines: list[str], budget: int) -> int:
    """``lines`` of a diff, at most ``budget`` of them; what is left of the budget."""
    from rich.syntax import Syntax  # noqa: PLC0415 rich only for a person

    if not lines:
        return budget
    if len(lines) > budget:
        lines = [*lines[:budget], f"[... {len(lines) - budget} more lines not shown: snodo audit show]"]
    console().print(Syntax("\n".join(lines), "diff", word_wrap=True, theme="ansi_dark"))
    return max(0, budget - len(lines))


def _prune(root: Path, home: Path, store: Any, signers: str | None, as_json: bool) -> None:
    """Drop (and audit) pending decisions settled by a verified record, or superseded by a newer
    escalation of the same task, phase and mode."""
    from snodo.state.audit import AuditLog  # noqa: PLC0415 `authorize --help` stays light
    from snodo.state.decisions import DecisionStore  # noqa: PLC0415 `authorize --help` stays light
    from snodo.state.proposals import ProposalStore  # noqa: PLC0415 `authorize --help` stays light
    from snodo.state.runtime import audit_log_path  # noqa: PLC0415 `authorize --help` stays light

    decisions = DecisionStore(root, home, signers=signers)  # the list in force decides what settled a decision
    pending = store.pending(root)  # oldest first
    newest = {(p.task_id, p.phase, p.mode): p.decision_id for _s, p in pending}
    dropped: list[dict[str, str]] = []
    log = AuditLog(audit_log_path(root), home=home)
    with log.batch():
        for session, p in pending:
            if decisions.decided(p):
                why = "already settled by a verified decision record"
            elif newest[(p.task_id, p.phase, p.mode)] != p.decision_id:
                why = f"superseded by the newer escalation {newest[(p.task_id, p.phase, p.mode)]}"
            else:
                continue
            store.remove_pending(session.session_id, p.decision_id)
            ProposalStore(root).remove(p.decision_id)
            row = {"decision_id": p.decision_id, "task_id": p.task_id, "reason": why}
            log.append("decision_pruned", mode=p.mode, data=row)
            dropped.append(row)
    if as_json:
        emit_json({"project": str(root), "pruned": dropped, "remaining": len(pending) - len(dropped)})
        return
    from rich.markup import escape  # noqa: PLC0415 rich only for a person

    for row in dropped:
        console().print(f"pruned {row['decision_id']} (task {escape(shown(row['task_id']))}): {row['reason']}")
    console().print(f"{len(dropped)} pruned, {len(pending) - len(dropped)} still pending")
