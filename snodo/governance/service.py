"""Validating a task end to end (runner → policy → outcome → token or pending decision →
audit): one path for ``snodo validate``, the MCP tool and the engine (ADR 015)."""

from __future__ import annotations

import os
import secrets
import shutil
import tempfile
from collections.abc import Sequence
from datetime import UTC, datetime
from functools import cached_property
from pathlib import Path
from typing import Any

from attrs import evolve, frozen

from snodo.base.errors import EnvironmentProblem, ToolError
from snodo.git.runner import run_git
from snodo.governance.policy import Classification, ValidatorResult, classify
from snodo.governance.runner import PhaseInput, ProgressFn, run_phase
from snodo.judging.tree import tree_of
from snodo.plugin.host import PluginHost
from snodo.plugin.records import JudgedWork
from snodo.protocol import LoadedProtocol
from snodo.protocol.models import Mode, Protocol
from snodo.rules.outcomes import Outcome, agent_instruction
from snodo.rules.taskids import check_task_id, derive_task_id, spec_sha256
from snodo.sandbox import SandboxPolicy
from snodo.sandbox.choose import missing
from snodo.sandbox.policy import limits_from_protocol
from snodo.state.audit import AuditLog
from snodo.state.decisions import DecisionStore
from snodo.state.home import snodo_home
from snodo.state.runtime import audit_log_path
from snodo.state.sessions import PendingDecision, Session, SessionStore, ensure_session, load_project_state
from snodo.state.tokens import TokenService
from snodo.workspace.changes import python_environments


class Project:
    """One governed project: its protocol, plugins, served mode and state stores."""

    def __init__(
        self,
        loaded: LoadedProtocol,
        host: PluginHost,
        *,
        mode: str | None = None,
        home: Path | None = None,
        served: bool = False,
    ) -> None:
        self.loaded = loaded
        self.protocol: Protocol = loaded.protocol
        self.root: Path = loaded.root
        self.host = host
        self.home = home or snodo_home()
        chosen = mode or load_project_state(self.root).current_mode or self.protocol.start_mode
        self.mode: Mode = self.protocol.mode(chosen)
        self._session: Session | None = None
        self._confinements: set[tuple[str, bool]] = set()
        #: a server's HEAD at its start is the base a change in the checkout is judged against
        self._start_head = _current_head(self.root) if served else None

    @property
    def mode_id(self) -> str:
        return self.mode.mode_id

    @cached_property
    def audit(self) -> AuditLog:
        return AuditLog(audit_log_path(self.root), home=self.home)

    @cached_property
    def tokens(self) -> TokenService:
        return TokenService(self.home)

    @cached_property
    def sessions(self) -> SessionStore:
        return SessionStore(self.home)

    @cached_property
    def decisions(self) -> DecisionStore:
        in_force = self.loaded.in_force
        return DecisionStore(self.root, self.home, signers=in_force.signers if in_force is not None else None)

    def record(self, event: str, **data: Any) -> dict[str, Any]:
        return self.audit.append(event, mode=self.mode_id, data=data)

    def sandbox_policy(self, workspace: Path | None = None, *, network: bool = False) -> SandboxPolicy:
        """How processes on agent-written content in ``workspace`` run; unconfined runs and backends are audited."""
        where = Path(workspace or self.root)

        def unconfined(argv: Sequence[str], cwd: Path) -> None:
            self.record(
                "unconfined_execution",
                argv=[str(a)[:500] for a in argv[:50]],
                cwd=str(cwd)[:4096],
                workspace=str(where),
            )

        def confining(backend: str) -> None:
            if (backend, network) not in self._confinements:
                self._confinements.add((backend, network))
                self.record("confinement", backend=backend, network=network, not_guaranteed=missing(backend))

        limits = self.protocol.execution.limits
        return SandboxPolicy(
            workspace=where,
            read_only=tuple(self.protocol.protected_paths),
            network=network,
            hidden=(self.home, *self._held_out()),
            env=tuple(self.protocol.execution.env),
            limits=limits_from_protocol(limits.file_size_mb, limits.processes, limits.memory_mb),
            mode=self.protocol.execution.sandbox,
            on_unconfined=unconfined,
            on_confined=confining,
        )

    def _held_out(self) -> tuple[Path, ...]:
        named = (v.tooling.get("held_out") for v in self.protocol.validators)
        paths = (
            Path(os.path.realpath(os.path.expanduser(n.strip()))) for n in named if isinstance(n, str) and n.strip()
        )
        return tuple(p for p in paths if p.is_dir())

    def session(self) -> Session:
        if self._session is None:
            session, created = ensure_session(self.root, self.mode_id, self.home, base_head=self._start_head)
            if created:
                self.record("session_started", session_id=session.session_id, protocol_id=self.protocol.protocol_id)
            self._session = session
        return self._session


@frozen(kw_only=True)
class ValidationOutcome:
    status: Outcome
    task_id: str
    spec_sha256: str
    phase: str
    results: tuple[ValidatorResult, ...]
    classification: Classification
    token: str | None = None
    decision_id: str | None = None
    tree: str = ""

    def payload(self) -> dict[str, Any]:
        """The SPEC §3 payload (never the token itself)."""
        return {
            "status": self.status,
            "task_id": self.task_id,
            "phase": self.phase,
            "token_issued": self.token is not None,
            "results": [r.for_agent() for r in self.results],
            "policy": self.classification.policy.as_json(),
            "reason": self.classification.reason,
            "instruction": agent_instruction(
                self.status, phase=self.phase, token_issued=self.token is not None, decision_id=self.decision_id
            ),
            **({"decision_id": self.decision_id} if self.decision_id is not None else {}),
        }


def _decision_results(
    project: Project, task_id: str, sha: str, tree: str
) -> tuple[frozenset[str], list[ValidatorResult]]:
    """Verified human decisions for exactly this task, spec and tree; bad ones are audited."""
    judged = project.decisions.judgement(task_id, sha, tree=tree)
    for ignored in judged.ignored:
        project.record(
            "decision_ignored",
            path=str(ignored.path),
            reason=ignored.reason,
            task_id=task_id,
            signer=ignored.signer or None,
            key=ignored.key or None,
        )
    vetoes = [
        ValidatorResult(
            validator_id=f"decision:{rec.decision_id}",
            validator_type="human-decision",
            severity="blocker",
            justification=f"{rec.decided_by} rejected this task on {rec.decided_at}: {rec.justification}",
            kind="constraint",
        )
        for rec in judged.rejections
    ]
    return judged.adjudicated, vetoes


def judged_tree(workspace: Path) -> str:
    """The git tree id of the workspace as validators judge it: what ``git add --all`` would stage
    (in a throw-away index; ``.snodo/`` as staged, a top-level Python environment never); "" outside git."""
    with tempfile.TemporaryDirectory(prefix="snodo-tree-") as scratch:
        index = os.path.join(scratch, "index")
        own = {"GIT_INDEX_FILE": index, "GIT_OPTIONAL_LOCKS": "0", "GIT_LITERAL_PATHSPECS": "0"}
        try:
            inside = run_git(workspace, "rev-parse", "--is-inside-work-tree", env={"GIT_OPTIONAL_LOCKS": "0"})
            if inside.stdout.strip() != "true":
                return ""
            real_index = run_git(workspace, "rev-parse", "--path-format=absolute", "--git-path", "index")
            if real_index.ok and os.path.isfile(real_index.stdout.strip()):
                shutil.copyfile(real_index.stdout.strip(), index)
            added = run_git(workspace, "add", "--all", "--", ".", ":(exclude,top).snodo", env=own)
            environments = python_environments(workspace)
            if added.ok and environments:
                added = run_git(
                    workspace, "rm", "-r", "--cached", "--quiet", "--ignore-unmatch", "--", *environments, env=own
                )
            tree = run_git(workspace, "write-tree", env=own) if added.ok else added
        except (OSError, EnvironmentProblem) as exc:
            raise ToolError(f"cannot read the git tree of {workspace}: {exc}") from None
        if not tree.ok:
            raise ToolError(f"cannot read the git tree of {workspace}: {tree.detail()}")
        return tree.stdout.strip()


def _current_head(root: Path, revision: str = "HEAD") -> str | None:
    try:
        found = run_git(root, "rev-parse", "--verify", "--quiet", revision)
    except EnvironmentProblem:
        return None
    return (found.stdout.strip() or None) if found.ok else None


def default_base(project: Project) -> str | None:
    """The commit a change in the checkout is judged against: the merge base of ``HEAD`` with its
    upstream, else the session's starting ``HEAD``, else ``HEAD`` (``None``: no commit)."""
    upstream = _current_head(project.root, "@{upstream}")
    try:
        found = run_git(project.root, "merge-base", "HEAD", upstream) if upstream else None
        if found is not None and found.ok and found.stdout.strip():
            return found.stdout.strip()
        started = project.session().base_head
        if started and run_git(project.root, "cat-file", "-e", f"{started}^{{commit}}").ok:
            return started
    except EnvironmentProblem:
        return None
    return _current_head(project.root)


def validate_task(
    project: Project,
    *,
    spec: str,
    task_id: str | None = None,
    phase: str = "pre_execute",
    changed_files: tuple[str, ...] = (),
    diff: str = "",
    issue_token: bool = True,
    progress: ProgressFn | None = None,
    workspace: Path | None = None,
    escalate: bool = True,
    tree: str | None = None,
    uncommitted: tuple[str, ...] | None = None,
    base: str | None = None,
    refused: tuple[dict[str, str], ...] = (),
) -> ValidationOutcome:
    """Run one phase for one task and settle the outcome, persisted before returning. ``refused``:
    the coder's refused writes (an escalation); ``tree``: the git tree judged and adjudicated
    (default: the workspace's); ``escalate=False``: the caller persists the escalation."""
    workspace = workspace or project.root
    with project.audit.batch():
        task_id = check_task_id(task_id) if task_id else derive_task_id(spec)
        sha = spec_sha256(spec)
        if tree is None:
            tree = judged_tree(workspace) if phase == "post_execute" else ""
        session = project.session()
        adjudicated, vetoes = _decision_results(project, task_id, sha, tree)
        results = run_phase(
            project.host,
            PhaseInput(
                protocol=project.protocol,
                mode=project.mode,
                phase=phase,
                task_id=task_id,
                task_spec=spec,
                workspace=workspace,
                changed_files=changed_files,
                diff=diff,
                sandbox=project.sandbox_policy(workspace),
                project_root=project.root,
                uncommitted=uncommitted,
                work=_judged_work(project, workspace, tree, uncommitted, base),
            ),
            progress=progress,
        )
        results = [*results, *vetoes, *_refused_writes(refused)]
        cls = classify(
            results,
            policy=project.protocol.disagreement_policy,
            quorum_threshold=project.protocol.quorum_threshold,
            adjudicated=adjudicated,
        )
        project.record(
            "validate",
            task_id=task_id,
            spec_sha256=sha,
            phase=phase,
            status=cls.status,
            results=[r.as_json() for r in results],
            policy=cls.policy.as_json(),
            session_id=session.session_id,
            **({"tree": tree} if tree else {}),
            **project.loaded.provenance(),
        )
        token = _token(project, cls, phase, results, task_id, sha) if issue_token else None
        outcome = ValidationOutcome(
            status=cls.status,
            task_id=task_id,
            spec_sha256=sha,
            phase=phase,
            results=tuple(results),
            classification=cls,
            token=token,
            tree=tree,
        )
        if cls.status == "escalate" and escalate:
            outcome = persist_escalation(project, outcome, spec)
        return outcome


def _token(
    project: Project, cls: Classification, phase: str, results: list[ValidatorResult], task_id: str, sha: str
) -> str | None:
    """The single-use token a pre_execute pass earns, recorded as issued."""
    if cls.status != "pass" or phase != "pre_execute":
        return None
    validators = [r.validator_id for r in results if r.kind == "validator"]
    token, claims = project.tokens.issued(task_id=task_id, spec_sha256=sha, mode=project.mode_id, validators=validators)
    project.record("token_issued", task_id=task_id, spec_sha256=sha, jti=claims.jti, exp=claims.exp)
    return token


def _judged_work(
    project: Project, workspace: Path, tree: str, uncommitted: tuple[str, ...] | None, base: str | None
) -> JudgedWork:
    """The judged tree (read only if a validator asks) and the base it is judged against."""

    def read_tree() -> str:
        if tree:
            return tree
        if uncommitted == ():  # the caller knows the checkout holds exactly its HEAD commit
            return tree_of(workspace, "HEAD")
        return judged_tree(workspace)

    return JudgedWork(
        workspace,
        base if base is not None else (lambda: default_base(project)),
        read_tree,
        cache=project.home / "judging",
    )


def _refused_writes(refused: tuple[dict[str, str], ...]) -> list[ValidatorResult]:
    if not refused:
        return []
    shown = "; ".join(f"{r.get('op', 'write')} {r.get('path')} ({r.get('reason')})" for r in refused[:20])
    more = f"; and {len(refused) - 20} more" if len(refused) > 20 else ""
    return [
        ValidatorResult(
            validator_id="refused-writes",
            validator_type="artifact-filter",
            severity="warn",
            justification=f"the coder's writes to {len(refused)} protected path(s) were refused: {shown}{more}",
            kind="constraint",
            escalate=True,
            details={"refused": [dict(r) for r in refused[:200]]},
        )
    ]


def _question(results: tuple[dict[str, Any], ...] | list[dict[str, Any]]) -> tuple[tuple[str, str, bool], ...]:
    """What a human is asked to decide: who said what (not the wording, which varies)."""
    return tuple(sorted((str(r.get("validator_id")), str(r.get("severity")), bool(r.get("error"))) for r in results))


def persist_escalation(project: Project, outcome: ValidationOutcome, spec: str) -> ValidationOutcome:
    """Store the pending decision before any caller reports it; the same question again gets the one pending."""
    with project.audit.batch():
        session = project.session()
        results = tuple(r.as_json() for r in outcome.results)
        question = (outcome.task_id, outcome.spec_sha256, outcome.tree, outcome.phase, project.mode_id)
        repeated = next(
            (
                existing.decision_id
                for _s, existing in project.sessions.pending(project.root)
                if (existing.task_id, existing.spec_sha256, existing.tree, existing.phase, existing.mode) == question
                and _question(existing.results) == _question(results)
            ),
            None,
        )
        decision_id = repeated if repeated is not None else "dec-" + secrets.token_hex(6)
        if repeated is None:
            pending = PendingDecision(
                decision_id=decision_id,
                task_id=outcome.task_id,
                spec_sha256=outcome.spec_sha256,
                mode=project.mode_id,
                phase=outcome.phase,
                results=results,
                policy=outcome.classification.policy.as_json(),
                created_at=datetime.now(UTC).isoformat(timespec="microseconds"),
                spec_text=spec,
                tree=outcome.tree,
            )
            project.sessions.add_pending(session.session_id, pending)
        project.record(
            "escalated",
            task_id=outcome.task_id,
            decision_id=decision_id,
            phase=outcome.phase,
            session_id=session.session_id,
            reason=outcome.classification.reason,
            **({"repeated": True} if repeated is not None else {"tree": outcome.tree} if outcome.tree else {}),
        )
    return evolve(outcome, decision_id=decision_id)
