"""Writing attestations, signed with the home's audit key: on every commit of a completed run
(judged; each names its own commit and tree) and on commits made through the tool surface
(``commit``, ``merge_branch``: not judged).
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from snodo.base.errors import SnodoError
from snodo.evidence.notes import NOTES_REF, list_range, write_note
from snodo.evidence.statement import sign_statement, statement
from snodo.git.runner import git_out, pin
from snodo.state.audit_key import audit_signing_key

if TYPE_CHECKING:
    from snodo.governance.service import Project

PROTOCOL_PATH = ".snodo/protocol.yml"
_VALIDATOR_FIELDS = ("validator_id", "validator_type", "severity", "severity_original", "kind")


def digest(data: bytes) -> str:
    return "sha256:" + hashlib.sha256(data).hexdigest()


def confinement(project: Project) -> str:
    """Which backend confined the run's agent-written code (``off`` when the protocol says so)."""
    if project.protocol.execution.sandbox == "off":
        return "off"
    from snodo.sandbox.choose import choose_backend  # noqa: PLC0415 the backend probe only when the protocol confines at all

    try:
        return choose_backend().name
    except SnodoError:
        return "none"


def _decisions(project: Project, task_id: str, spec_sha: str, tree: str) -> list[dict[str, str]]:
    """The verified human decisions the run's verdicts rest on (before and after execution)."""
    out = []
    for bound in ("", tree):
        records, _ = project.decisions.verified_records(task_id, spec_sha, tree=bound)
        out += [
            {
                "decision_id": r.decision_id,
                "decision": r.decision,
                "decided_by": r.decided_by,
                "key": r.public_key_fingerprint,
            }
            for r in records
        ]
    return out


def _attest(
    project: Project, commits: Sequence[tuple[str, str]], predicate: Mapping[str, Any], *, base: str | None
) -> list[str]:
    """Sign and attach the statement on each ``(commit, tree)``, with what every predicate
    names: the protocol file loaded (``base``: the run's base), the mode, the confinement."""
    try:
        loaded = digest(project.loaded.path.read_bytes())  # the file the run was governed by, as on disk
    except OSError:
        loaded = None
    predicate = {
        **predicate,
        "protocol": {"path": PROTOCOL_PATH, "digest": loaded, "base": base},
        "mode": project.mode_id,
        "confinement": confinement(project),
    }
    key = audit_signing_key(project.home)
    for commit, tree in commits:
        write_note(project.root, commit, sign_statement(statement(commit, tree, predicate), key))
    return [commit for commit, _ in commits]


def _range(repo: Path, base: str, tip: str) -> list[tuple[str, str]]:
    return [(e.sha, e.tree) for e in reversed(list_range(repo, [tip, f"^{base}"]))]


def _commit_and_tree(repo: Path, rev: str) -> tuple[str, str]:
    commit = git_out(repo, "rev-parse", "--verify", f"{rev}^{{commit}}")
    return commit, git_out(repo, "rev-parse", f"{commit}^{{tree}}")


def _coder(project: Project, coder: str) -> dict[str, str | None]:
    model = project.mode.coder_config.get("model") if coder == project.mode.coder else None
    return {"name": coder, "model": str(model) if model is not None else None}


def attest_run(
    project: Project,
    *,
    base: str,
    tip: str,
    task_id: str,
    spec_sha: str,
    run_id: str,
    coder: str,
    reason: str,
    results: Sequence[Mapping[str, Any]],
    audit: Mapping[str, Any],
    made: Sequence[tuple[str, str]] | None = None,
    judged_tree: str = "",
) -> list[str]:
    """Attest every commit of a completed run (``base..tip``, or ``made``: ``(commit, tree)``,
    oldest first) if the tip's tree is ``judged_tree``; returns the commits attested. A failure is
    audited, never raised: without a note ``snodo verify`` refuses the work, the truth."""
    try:
        commits = list(made) if made else _range(project.root, base, tip)
        tip, tree = commits[-1] if commits else _commit_and_tree(project.root, tip)
        if judged_tree and tree != judged_tree:
            raise SnodoError(
                f"the tip {tip[:12]}'s tree {tree[:12]} is not the tree the validators judged ({judged_tree[:12]})"
            )
        predicate = {
            "judged": True,
            "status": "completed",
            "task_id": task_id,
            "spec_sha256": spec_sha,
            "run_id": run_id,
            "tip": tip,
            "judged_tree": judged_tree or tree,
            "outcome": "pass",
            "policy_reason": reason,
            "validators": [{k: r[k] for k in _VALIDATOR_FIELDS if k in r} for r in results],
            "decisions": _decisions(project, task_id, spec_sha, tree),
            "coder": _coder(project, coder),
            "audit": {"log": _log_name(project), "seq": audit.get("seq"), "hash": audit.get("hash")},
        }
        # the protocol loaded is the base's unless the checkout changed it (then `snodo verify`
        # finds the digests differ, as it should)
        done = _attest(project, commits, predicate, base=base)
        project.record("attested", task_id=task_id, run_id=run_id, commits=done, notes_ref=NOTES_REF, judged=True)
        return done
    except SnodoError as exc:
        project.record("attest_failed", task_id=task_id, run_id=run_id, error=exc.message)
        return []


def attest_tool_commit(project: Project, commit: str, *, tool: str, session_id: str) -> None:
    """Attest a commit the agent made through the tool surface: visible, never judged."""
    predicate = {
        "judged": False,
        "status": "tool_commit",
        "tool": tool,
        "session_id": session_id,
        "audit": None,  # the tool call's own audit line records the commit
    }
    try:
        _attest(project, [(commit, git_out(project.root, "rev-parse", f"{commit}^{{tree}}"))], predicate, base=None)
    except SnodoError as exc:  # the commit is made; a missing note only makes verify refuse it
        project.record("attest_failed", commits=[commit], tool=tool, error=exc.message)
        return
    project.record("attested", commits=[commit], notes_ref=NOTES_REF, judged=False, tool=tool)


def _log_name(project: Project) -> str:
    """Which log the attested head is in, the same on every machine (``$GIT_COMMON_DIR/snodo/audit.log``)."""
    path = Path(project.audit.path)
    context = pin(project.root)
    if context is not None and context.common_dir() in path.parents:
        return f"$GIT_COMMON_DIR/{path.relative_to(context.common_dir()).as_posix()}"
    return path.name
