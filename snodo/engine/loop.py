"""The governed run loop: governance → validate → execute → post-validate → complete or halt.

One task, one run, one working copy (see :mod:`snodo.engine.worktree`). The token issued by
pre-execute validation is verified and consumed at the execute boundary, immediately before
the coder runs; nothing executes without it. After the coder, the artifact filter hooks
drop governance and protected paths (audited), the rest is written through the path guard
and committed on the task branch, and the post-execute validators judge the result.

Recovery: a post-execute ``escalate`` whose warns came from validators (including blockers
lowered by ``severity_cap``) re-enters the coder with the findings, bounded by
``max_recovery_depth``, ``max_total_fix_attempts``, ``max_iterations`` and a stall check
(the same verdict after the same change). An uncapped blocker is terminal.
"""

from __future__ import annotations

import os
import secrets
import shutil
from collections.abc import Callable, Mapping
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any, Literal

from attrs import Factory, evolve, frozen

from snodo.engine import change
from snodo.engine.inplace import InPlaceWatch, Judgement
from snodo.engine.interrupt import Interrupted
from snodo.engine.worktree import Worktree, create_worktree, reclaim_abandoned, uncommitted
from snodo.errors import CoderError, EnvironmentProblem, PathValidationError, PluginError, SnodoError, TokenError
from snodo.evidence.attest import attest_run
from snodo.gitrun import pin
from snodo.governance.policy import ValidatorResult
from snodo.governance.service import (
    Project,
    ValidationOutcome,
    check_task_id,
    derive_task_id,
    persist_escalation,
    spec_sha256,
    validate_task,
)
from snodo.outcomes import RUN_NEXT_STEP, HaltOutcome
from snodo.records import ArtifactContext, CoderRequest, CoderResult, CoderSpec, FileOperation, freeze
from snodo.sandbox import confined
from snodo.settings import coder_config_problems
from snodo.workspace import Git, PathGuard, Workspace
from snodo.workspace.gitmeta import GitMetadataRefused, GitMetaWatch

Progress = Callable[[str], None]


RunStatus = Literal["completed", "halted"]


@frozen(kw_only=True)
class RunResult:
    status: RunStatus
    task_id: str
    outcome: HaltOutcome | None = None
    phase: str | None = None
    message: str = ""
    branch: str | None = None
    commit: str | None = None
    decision_id: str | None = None
    results: tuple[dict[str, Any], ...] = ()
    files: tuple[str, ...] = ()
    attempts: int = 0
    job_id: str | None = None
    dropped: tuple[dict[str, str], ...] = Factory(tuple)
    usage: tuple[dict[str, Any], ...] = Factory(tuple)  # what each coder attempt spent, as it reported
    #: where a halted run's commits are kept (``refs/snodo/halted/<task>/<run>``), if any
    halted_ref: str | None = None
    #: what was thrown away, and why, when a constraint said the work must not be kept
    discarded: dict[str, Any] | None = None

    def payload(self) -> dict[str, Any]:
        key = "completed" if self.status == "completed" else (self.outcome or "internal_error")
        return {
            "status": self.status,
            "outcome": self.outcome,
            "task_id": self.task_id,
            "job_id": self.job_id,
            "phase": self.phase,
            "message": self.message,
            "branch": self.branch,
            "commit": self.commit,
            "decision_id": self.decision_id,
            "files": list(self.files),
            "attempts": self.attempts,
            "validators": list(self.results),
            "dropped": list(self.dropped),
            "usage": list(self.usage),
            "halted_ref": self.halted_ref,
            "discarded": self.discarded,
            "next": RUN_NEXT_STEP[key].format(decision_id=self.decision_id, task_id=self.task_id),
        }


@frozen(kw_only=True)
class HaltRecord:
    """Why and where a run stopped, and what it leaves behind (results, files, commit)."""

    outcome: HaltOutcome
    phase: str
    message: str
    results: tuple[dict[str, Any], ...] = ()
    decision_id: str | None = None
    commit: str | None = None
    files: tuple[str, ...] = ()


class Halt(Exception):
    """Stops a run; carries its :class:`HaltRecord`."""

    def __init__(
        self,
        outcome: HaltOutcome,
        phase: str,
        message: str,
        *,
        validation: ValidationOutcome | None = None,
        results: tuple[dict[str, Any], ...] = (),
        commit: str | None = None,
        files: tuple[str, ...] = (),
    ) -> None:
        super().__init__(message)
        if validation is not None and not results:
            results = tuple(r.as_json() for r in validation.results)
        self.record = HaltRecord(
            outcome=outcome,
            phase=phase,
            message=message,
            results=results,
            decision_id=validation.decision_id if validation is not None else None,
            commit=commit,
            files=files,
        )


@frozen(kw_only=True)
class _Progress:
    """What the attempts of one run have built up so far (the loop's only state)."""

    attempt: int = 0
    findings: tuple[str, ...] = ()
    last_signature: tuple[Any, ...] | None = None
    files: frozenset[str] = frozenset()
    dropped: tuple[dict[str, str], ...] = ()
    commit: str | None = None


@frozen(kw_only=True)
class _Attempt:
    """One coder attempt and the post_execute verdict on the whole change so far."""

    post: ValidationOutcome
    results: tuple[dict[str, Any], ...]
    changed: tuple[str, ...]
    signature_ops: tuple[Any, ...]


class Engine:
    """Runs tasks for one :class:`Project` (protocol, mode, plugins, state)."""

    def __init__(
        self,
        project: Project,
        *,
        coder: str | None = None,
        progress: Progress | None = None,
        job_id: str | None = None,
    ) -> None:
        self.project = project
        self.coder_name = coder or project.mode.coder
        report = progress or (lambda _msg: None)
        self.activity = ""  # the last thing reported: what was running if the run is interrupted

        def tracked(msg: str) -> None:
            self.activity = msg
            report(msg)

        self.progress: Progress = tracked
        self.job_id = job_id
        self.run_id = secrets.token_hex(4)
        self.attempt = 0
        self.usage: list[dict[str, Any]] = []
        self.phase = "governance"
        self.spec_text = ""
        self.coder_head: str | None = None  # the working copy's tip after a coder's own commits

    # ------------------------------------------------------------------ public

    def run(self, spec: str, *, task_id: str | None = None) -> RunResult:
        task_id = check_task_id(task_id) if task_id else derive_task_id(spec)
        self.spec_text = spec
        p = self.project
        p.session()
        p.record(
            "run_started",
            task_id=task_id,
            run_id=self.run_id,
            job_id=self.job_id,
            coder=self.coder_name,
            spec_sha256=spec_sha256(spec),
            **p.loaded.provenance(),
        )
        worktree: Worktree | None = None
        attempts = 0
        try:
            coder_spec = self._coder_spec()
            self._check_programs(coder_spec)
            # The mode's coder_config belongs to the mode's coder; an override starts clean.
            config = p.mode.coder_config if coder_spec.name == p.mode.coder else freeze({})
            self._check_settings(coder_spec, config)
            coder = coder_spec.factory(config)  # bad settings halt before any token exists
            pin(p.root)  # the repository every later git command names, found before any agent ran
            self._preflight(coder_spec.name, config)
            for gone in reclaim_abandoned(p.root, p.home, judge=lambda left: self._judge_unjudged(left, ())):
                p.record("worktree_reclaimed", **gone)
                self.progress(f"removed the working copy of run {gone['run_id']}, whose process had died")
            with ThreadPoolExecutor(max_workers=1) as side:  # both read a whole tree: side by side
                looking = side.submit(uncommitted, p.root)
                worktree = create_worktree(p.root, p.home, task_id, self.run_id)
                left_out = looking.result()
            self.progress(f"working copy {worktree.path} (run {self.run_id})")
            if left_out:
                self.progress(
                    f"note: the run starts from your last commit; {len(left_out)} uncommitted path(s) are not "
                    f"part of it ({', '.join(left_out[:5])}{', …' if len(left_out) > 5 else ''})"
                )
            result = self._loop(spec, task_id, coder_spec, coder, config, worktree)
            attempts = result.attempts
            worktree.keep_as_branch()  # only completed work gets a branch
            completed = p.record(
                "completed",
                task_id=task_id,
                run_id=self.run_id,
                branch=result.branch,
                commit=result.commit,
                files=list(result.files),
                attempts=attempts,
            )
            attest_run(
                p,
                base=worktree.base,
                tip=worktree.branch,
                task_id=task_id,
                spec_sha=spec_sha256(spec),
                run_id=self.run_id,
                coder=self.coder_name,
                reason=result.message,
                results=result.results,
                audit=completed,
            )
            return result
        except Halt as halt:
            return self._halted(task_id, halt, worktree)
        except Interrupted as stop:
            phase = "execute" if self.activity.startswith("coder") else self.phase
            message = f"interrupted by {stop.signal_name} during {phase}"
            if self.activity:
                message += f" ({self.activity})"
            return self._halted(task_id, Halt("interrupted", phase, message), worktree)
        except CoderError as exc:  # the coder ran and said it could not do the work
            return self._halted(task_id, Halt("coder_failed", "execute", f"the coder failed: {exc}"), worktree)
        except (EnvironmentProblem, PluginError) as exc:
            return self._halted(task_id, Halt("environment_error", "execute", str(exc)), worktree)
        except SnodoError as exc:
            return self._halted(task_id, Halt("internal_error", "engine", str(exc)), worktree)
        except Exception as exc:  # fail closed: an unexpected fault halts and is audited
            return self._halted(task_id, Halt("internal_error", "engine", f"{type(exc).__name__}: {exc}"), worktree)
        finally:
            if worktree is not None:
                worktree.remove()

    # ----------------------------------------------------------------- stages

    def _coder_spec(self) -> CoderSpec:
        return self.project.host.coder(self.coder_name)

    def _check_programs(self, spec: CoderSpec) -> None:
        """Declared programs are checked before any token is issued or consumed."""
        for prog in spec.capabilities.required_programs:
            if shutil.which(prog.name) is None:
                raise Halt(
                    "environment_error",
                    "governance",
                    f"coder {spec.name!r} needs the program {prog.name!r} on PATH; install it: {prog.install_hint}",
                )

    def _check_settings(self, spec: CoderSpec, config: dict[str, Any]) -> None:
        """``coder_config`` keys the coder does not declare are refused before any token is
        issued or consumed: a typo must not silently run the coder on its defaults."""
        problems = coder_config_problems(spec.name, spec.capabilities.settings, config)
        if problems:
            raise Halt(
                "environment_error",
                "governance",
                f"mode {self.project.mode_id!r}: {'; '.join(m for _k, m in problems)}; fix coder_config in "
                ".snodo/protocol.yml (see docs/plugins.md)",
            )

    def _preflight(self, coder: str, config: dict[str, Any]) -> None:
        """Every model-backed plugin the run will use checks its credentials and endpoint
        (``snodo_preflight``) before any token is issued: a missing key halts here, free."""
        p = self.project
        phases = ("pre_execute", "post_execute")
        validators = tuple(v for phase in phases for v in p.protocol.validators_for(p.mode, phase))
        try:
            p.host.pm.hook.snodo_preflight(mode=p.mode, coder=coder, coder_config=config, validators=validators)
        except (EnvironmentProblem, CoderError) as exc:
            raise Halt("environment_error", "governance", f"preflight: {exc}") from None

    def _validate(
        self,
        spec: str,
        task_id: str,
        phase: str,
        workspace: Path,
        changed: tuple[str, ...] = (),
        diff: str = "",
        persist_escalation: bool = True,
    ) -> ValidationOutcome:
        self.phase = phase
        self.progress(f"{phase} validation")
        watch = GitMetaWatch(workspace)  # validators run confined code: no new git metadata may stay
        outcome = validate_task(
            self.project,
            spec=spec,
            task_id=task_id,
            phase=phase,
            workspace=workspace,
            changed_files=changed,
            diff=diff,
            issue_token=(phase == "pre_execute"),
            progress=lambda msg, _r: self.progress(msg),
            escalate=persist_escalation,
        )
        for r in outcome.results:
            spent = (r.details or {}).get("usage")
            self._spent(task_id, self.attempt, spent, validator=r.validator_id, phase=phase)
        found = watch.intruders()
        for path, reason in found:
            self.project.record("path_refused", task_id=task_id, path=path, source=f"{phase}:validators", reason=reason)
        if found:
            raise Halt("blocker", phase, GitMetadataRefused(found).message, validation=outcome)
        return outcome

    def _loop(
        self, spec: str, task_id: str, coder_spec: CoderSpec, coder: Any, config: dict[str, Any], wt: Worktree
    ) -> RunResult:
        """Pre-validate and consume the token, then attempt and decide, until a verdict ends it."""
        self._pre_validate_and_consume(spec, task_id, wt)
        git = Git(wt.path, PathGuard(wt.path, self.project.protocol.protected_paths))
        state = _Progress()
        while True:
            try:
                state, attempt = self._attempt(spec, task_id, coder_spec, coder, config, wt, git, state)
            except CoderError as exc:  # the coder could not do it: another attempt, with why, while budgets last
                ex = self.project.protocol.execution
                if state.attempt >= min(ex.max_recovery_depth, ex.max_total_fix_attempts):
                    raise
                findings = (f"your previous attempt failed: {exc}",)
                self.attempt = state.attempt + 1
                self.project.record("recovery", task_id=task_id, attempt=self.attempt, findings=list(findings))
                self.progress(f"recovery attempt {self.attempt}: the coder failed: {str(exc)[:200]}")
                state = evolve(state, attempt=self.attempt, findings=findings)
                continue
            outcome = self._recovery_decision(spec, task_id, wt, state, attempt)
            if isinstance(outcome, RunResult):
                return outcome
            state = outcome

    def _pre_validate_and_consume(self, spec: str, task_id: str, wt: Worktree) -> None:
        """The pre_execute verdict, then the execute boundary: the token is verified and
        consumed exactly once, right here, or nothing runs."""
        p = self.project
        pre = self._validate(spec, task_id, "pre_execute", wt.path)
        if pre.status != "pass":
            raise Halt(pre.status, "pre_execute", pre.classification.reason, validation=pre)
        if pre.token is None:
            raise Halt("internal_error", "pre_execute", "validation passed but no token was issued", validation=pre)
        try:
            claims = p.tokens.consume(
                pre.token, task_id=task_id, spec_sha256=pre.spec_sha256, consumer=f"engine:{self.run_id}"
            )
        except TokenError as exc:
            raise Halt("internal_error", "execute", f"the validation token was refused at execute: {exc}") from None
        p.record("token_consumed", task_id=task_id, jti=claims.jti, consumer=f"engine:{self.run_id}")

    def _attempt(
        self,
        spec: str,
        task_id: str,
        coder_spec: CoderSpec,
        coder: Any,
        config: dict[str, Any],
        wt: Worktree,
        git: Git,
        state: _Progress,
    ) -> tuple[_Progress, _Attempt]:
        """One coder attempt: run it, commit what it changed, judge the whole change."""
        p = self.project
        ex = p.protocol.execution
        attempt = state.attempt
        if attempt + 1 > ex.max_iterations:
            raise Halt("blocker", "post_execute", f"max_iterations ({ex.max_iterations}) reached")
        request = CoderRequest(
            task_id=task_id,
            spec=spec,
            workspace=wt.path,
            mode_id=p.mode_id,
            criteria=tuple(c for v in p.protocol.validators_for(p.mode, "post_execute") for c in v.criteria),
            guidance=p.mode.description,
            protected_paths=(".snodo/", ".git/", *p.protocol.protected_paths),
            config=config,
            findings=state.findings,
            attempt=attempt,
            log=lambda line: self.progress(f"coder: {line}"),
        )
        p.record(
            "dispatch",
            task_id=task_id,
            coder=coder_spec.name,
            attempt=attempt,
            run_id=self.run_id,
            findings=list(state.findings),
        )
        self.progress(f"coder {coder_spec.name} (attempt {attempt})")
        changed, dropped, signature_ops = self._execute(coder, coder_spec, request, wt, task_id)
        files = state.files | set(changed)
        message = f"snodo: {task_id} attempt {attempt}\n\n{spec.strip()[:500]}"
        made = change.commit_paths(wt.path, git.guard, sorted(changed), message) if changed else None
        commit = made or self.coder_head or state.commit
        if made is not None:
            p.record("commit", task_id=task_id, branch=wt.branch, commit=commit, files=sorted(changed))
        state = evolve(state, files=files, dropped=(*state.dropped, *dropped), commit=commit)
        # The change is the committed one, base tree against tip tree: it costs what changed.
        all_changed = tuple(change.changed_files(wt.path, wt.base, commit)) if files and commit else ()
        if not all_changed or commit is None:
            raise Halt("blocker", "execute", f"coder {coder_spec.name!r} produced no change; nothing to validate")
        diff = change.read_diff(wt.path, wt.base, commit)
        post = self._validate(spec, task_id, "post_execute", wt.path, all_changed, diff, persist_escalation=False)
        results = tuple(r.as_json() for r in post.results)
        return state, _Attempt(post=post, results=results, changed=all_changed, signature_ops=signature_ops)

    def _recovery_decision(
        self, spec: str, task_id: str, wt: Worktree, state: _Progress, done: _Attempt
    ) -> RunResult | _Progress:
        """What the post_execute verdict means: completed; a halt (blocker, validator_error,
        or an escalation once the fix budget is spent or the run stalls); or another attempt
        with the findings (the returned state)."""
        p = self.project
        ex = p.protocol.execution
        post, attempt = done.post, state.attempt
        if post.status == "pass":
            return RunResult(
                status="completed",
                task_id=task_id,
                phase="post_execute",
                branch=wt.branch,
                commit=state.commit,
                results=done.results,
                files=done.changed,
                attempts=attempt,
                job_id=self.job_id,
                message=post.classification.reason,
                dropped=state.dropped,
                usage=tuple(self.usage),
            )
        if post.status in ("blocker", "validator_error"):
            raise Halt(
                post.status,
                "post_execute",
                post.classification.reason,
                results=done.results,
                commit=state.commit,
                files=done.changed,
            )
        # escalate: recoverable by a fix attempt while budgets last.
        # Stall: the same verdicts (severities, not wording: test timings vary) after the same change.
        verdicts = tuple((r.validator_id, r.severity, r.severity_original) for r in post.results)
        signature = (verdicts, done.signature_ops)
        budget = min(ex.max_recovery_depth, ex.max_total_fix_attempts)
        stalled = signature == state.last_signature
        if attempt >= budget or stalled:
            why = "the same verdict after the same change" if stalled else f"{attempt} fix attempt(s) used"
            final = persist_escalation(p, post, spec)
            raise Halt(
                "escalate",
                "post_execute",
                f"recovery stopped ({why}): {post.classification.reason}",
                validation=final,
                commit=state.commit,
                files=done.changed,
            )
        attempt += 1
        self.attempt = attempt
        findings = tuple(_finding(r) for r in post.results if r.severity != "pass")
        p.record("recovery", task_id=task_id, attempt=attempt, findings=list(findings))
        self.progress(f"recovery attempt {attempt}/{budget}: {'; '.join(findings)[:200]}")
        return evolve(state, attempt=attempt, findings=findings, last_signature=signature)

    def _execute(
        self, coder: Any, spec: CoderSpec, request: CoderRequest, wt: Worktree, task_id: str
    ) -> tuple[list[str], list[dict[str, str]], tuple[Any, ...]]:
        p = self.project
        caps = spec.capabilities
        watch = (
            InPlaceWatch(
                wt.path,
                PathGuard(wt.path, p.protocol.protected_paths),
                branch=wt.branch,
                commits_own_changes=caps.commits_own_changes,
            )
            if caps.writes_in_place
            else None
        )
        try:
            try:
                with confined(p.sandbox_policy(wt.path, network=spec.capabilities.needs_network)):
                    result = coder.generate(request)
            except BaseException as exc:  # a failed, timed-out or interrupted attempt still spent
                self._spent(task_id, request.attempt, getattr(exc, "usage", None), coder=spec.name)
                if isinstance(exc, EnvironmentProblem | CoderError) or not isinstance(exc, Exception):
                    raise
                raise EnvironmentProblem(f"coder {spec.name!r} crashed: {type(exc).__name__}: {exc}") from exc
        except Exception:
            if watch is not None:  # what it did before failing is judged all the same
                self._refuse_in_place(watch.judge(), spec.name, task_id)
            raise
        if not isinstance(result, CoderResult):
            raise CoderError(f"coder {spec.name!r} returned {type(result).__name__}, not a CoderResult")
        self._spent(task_id, request.attempt, result.usage, coder=spec.name)
        if watch is not None:
            judged = watch.judge()
            self._refuse_in_place(judged, spec.name, task_id)
            if judged.commits:
                self.coder_head = judged.head
                p.record(
                    "commit",
                    task_id=task_id,
                    branch=wt.branch,
                    commit=judged.head,
                    commits=list(judged.commits),
                    files=list(judged.changed),
                    by=f"coder:{spec.name}",
                )
            return list(judged.changed), [], judged.signature
        ops = tuple(result.operations)
        kept, dropped = p.host.filter_artifacts(
            ops,
            ArtifactContext(
                workspace=wt.path, task_id=task_id, mode_id=p.mode_id, protected_paths=p.protocol.protected_paths
            ),
        )
        dropped_json = []
        for d in dropped:
            p.record(
                "path_refused",
                task_id=task_id,
                path=d.operation.path,
                op=d.operation.op,
                source=f"coder:{spec.name}",
                reason=d.reason,
            )
            dropped_json.append({"path": d.operation.path, "op": d.operation.op, "reason": d.reason})
            self.progress(f"refused {d.operation.op} {d.operation.path}: {d.reason}")
        ws = Workspace(wt.path, PathGuard(wt.path, p.protocol.protected_paths))
        changed: list[str] = []
        for op in kept:
            try:
                if op.op == "write":
                    ws.write_file(op.path, op.content or "")
                else:
                    ws.delete_file(op.path)
            except PathValidationError as exc:  # second line of defence behind the filter
                p.record(
                    "path_refused",
                    task_id=task_id,
                    path=op.path,
                    op=op.op,
                    source=f"coder:{spec.name}",
                    reason=exc.reason,
                )
                dropped_json.append({"path": op.path, "op": op.op, "reason": exc.reason})
                continue
            changed.append(_normalise(wt.path, op))
        return changed, dropped_json, tuple((o.op, o.path, o.content) for o in kept)

    def _spent(self, task_id: str, attempt: int, reported: Any, **who: str) -> None:
        """Record what a coder attempt (``coder=``) or a judge (``validator=``, ``phase=``)
        spent: in the run's ``usage`` and as a ``coder_usage``/``judge_usage`` audit event."""
        usage = _plain_usage(reported)
        if not usage:
            return
        entry = {"attempt": attempt, **who, **usage}
        self.usage.append(entry)
        event = "coder_usage" if "coder" in who else "judge_usage"
        self.project.record(event, task_id=task_id, run_id=self.run_id, **entry)

    def _refuse_in_place(self, judged: Judgement, coder: str, task_id: str) -> None:
        """One ``path_refused`` per path an in-place coder may not change, then halt."""
        for path, reason in judged.refused:
            extra = {"restored": path in judged.restored} if path.startswith(("../", ".git/")) else {}
            self.project.record(
                "path_refused", task_id=task_id, path=path, source=f"coder:{coder}", reason=reason, **extra
            )
        if judged.refused:
            raise Halt("blocker", "execute", judged.message(coder))

    # ----------------------------------------------------------------- halting

    def _halted(self, task_id: str, stop: Halt, wt: Worktree | None) -> RunResult:
        halt = stop.record
        kept_ref, discarded = self._dispose(task_id, wt, halt.results, halt.files)
        result = RunResult(
            status="halted",
            task_id=task_id,
            outcome=halt.outcome,
            phase=halt.phase,
            message=halt.message,
            branch=None,  # only completed work gets a branch
            commit=None if discarded else halt.commit,
            decision_id=halt.decision_id,
            results=halt.results,
            files=halt.files,
            job_id=self.job_id,
            attempts=self.attempt,
            usage=tuple(self.usage),
            halted_ref=kept_ref,
            discarded=discarded,
        )
        self.project.record(
            "halt",
            task_id=task_id,
            run_id=self.run_id,
            outcome=halt.outcome,
            phase=halt.phase,
            message=halt.message,
            decision_id=halt.decision_id,
            halted_ref=kept_ref,
            discarded=bool(discarded),
        )
        return result

    def _dispose(
        self, task_id: str, wt: Worktree | None, results: tuple[dict[str, Any], ...], files: tuple[str, ...]
    ) -> tuple[str | None, dict[str, Any] | None]:
        """Keep a halted run's commits under the halted namespace, or throw them away when a
        failed constraint's predicate says the work must not be kept. Returns (ref, discarded)."""
        if wt is None:
            return None, None
        reasons = self._discard_reasons(results)
        if not reasons:
            try:
                reasons = self._judge_unjudged(wt, results)
            except SnodoError as exc:  # fail closed: work that cannot be judged is not kept
                reasons = [{"constraint": "-", "predicate": "-", "finding": f"could not be judged: {exc}"}]
        if not reasons:
            try:
                ref = wt.keep_halted()
            except SnodoError as exc:
                self.progress(f"could not keep the halted run's commits: {exc}")
                return None, None
            if ref:
                self.progress(f"the halted run's commits are kept at {ref}")
            return ref, None
        try:
            done = wt.discard()
        except SnodoError as exc:  # the working copy is gone; say what could not be done
            done = {"error": str(exc)}
        discarded = {
            "reason": "a constraint whose failure means the work must not be kept failed",
            "constraints": reasons,
            "files": list(files),
            **done,
        }
        self.project.record("work_discarded", task_id=task_id, run_id=self.run_id, **discarded)
        self.progress(f"the run's work was discarded: {'; '.join(r['finding'] for r in reasons)[:300]}")
        return None, discarded

    def _discard_reasons(self, results: tuple[dict[str, Any], ...]) -> list[dict[str, str]]:
        """Failed constraints whose predicate declares ``discard_work_on_failure``. A predicate
        that could not judge (an error) counts as failed: fail closed."""
        reasons = []
        for r in results:
            vtype = str(r.get("validator_type", ""))
            if r.get("kind") != "constraint" or r.get("severity") == "pass" or not vtype.startswith("predicate:"):
                continue
            try:
                spec = self.project.host.predicate(vtype.removeprefix("predicate:"))
            except SnodoError:
                continue
            if spec.discard_work_on_failure:
                reasons.append(
                    {
                        "constraint": str(r.get("validator_id")),
                        "predicate": spec.name,
                        "finding": str(r.get("justification")),
                    }
                )
        return reasons

    def _judge_unjudged(self, wt: Worktree, results: tuple[dict[str, Any], ...]) -> list[dict[str, str]]:
        """Commits about to be kept that a discarding constraint never judged (the run was
        interrupted, or halted before post_execute finished) are judged now, so no kept ref
        holds what such a constraint forbids."""
        from snodo.governance.runner import PhaseInput, constraints_for, run_constraints

        tip = wt.tip()
        if tip is None or tip == wt.base:
            return []
        p = self.project
        judged = {str(r.get("validator_id")) for r in results}
        pending = {}
        for c in constraints_for(p.protocol, p.mode, p.protocol.validators_for(p.mode, "post_execute")):
            if f"constraint:{c.constraint_id}" in judged:
                continue
            try:
                spec = p.host.predicate(c.predicate)
            except SnodoError:
                continue
            if spec.discard_work_on_failure:
                pending[f"constraint:{c.constraint_id}"] = (c, spec.name)
        if not pending:
            return []
        inp = PhaseInput(
            protocol=p.protocol,
            mode=p.mode,
            phase="post_execute",
            task_id=wt.task_id,
            task_spec=self.spec_text,
            workspace=wt.path,
            changed_files=tuple(change.changed_files(wt.path, wt.base, tip)),
            diff=change.read_diff(wt.path, wt.base, tip),
            sandbox=p.sandbox_policy(wt.path),
        )
        # Through the one runner, confined like every other evaluation: a predicate that
        # cannot judge (an error) fails closed and discards.
        verdicts = run_constraints(p.host, [c for c, _ in pending.values()], inp)
        return [
            {"constraint": v.validator_id, "predicate": pending[v.validator_id][1], "finding": v.justification}
            for v in verdicts
            if v.severity != "pass"
        ]


def _plain_usage(usage: Any) -> dict[str, Any]:
    """A coder's usage report, kept to bounded JSON scalars (it is plugin output, so untrusted)."""
    if not isinstance(usage, Mapping):
        return {}
    plain: dict[str, Any] = {}
    for key, value in list(usage.items())[:32]:
        if not isinstance(key, str) or key in ("attempt", "task_id", "coder", "validator", "phase", "run_id"):
            continue
        if isinstance(value, bool | int | float) or value is None:
            plain[key[:64]] = value
        elif isinstance(value, str):
            plain[key[:64]] = value[:300]
        elif isinstance(value, list | tuple):
            plain[key[:64]] = [str(v)[:300] for v in value[:20]]
    return plain


def _normalise(root: Path, op: FileOperation) -> str:
    return Path(os.path.relpath(os.path.normpath(root / op.path), root)).as_posix()


def _finding(result: ValidatorResult) -> str:
    """What a fix attempt is told about one verdict: its reason, failed tests and their output."""
    text = f"{result.validator_id}: {result.justification}"
    details = result.details or {}
    failed = details.get("failed_tests")
    if isinstance(failed, list) and failed:
        text += "\nfailed tests: " + ", ".join(str(t) for t in failed[:20])
    excerpt = details.get("output_excerpt")
    if isinstance(excerpt, str) and excerpt.strip():
        text += "\noutput:\n" + excerpt[:4000]
    return text
