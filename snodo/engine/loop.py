"""The governed run loop: governance → validate → execute → post-validate → complete or halt;
the token is consumed right before the coder runs; recovery and its bounds: docs/architecture.md."""

from __future__ import annotations

import secrets
from collections.abc import Sequence
from pathlib import Path
from typing import Any, NoReturn

from snodo.base.errors import CoderError, TokenError
from snodo.base.frozen import freeze
from snodo.engine import change
from snodo.engine.checks import check_before_run
from snodo.engine.disposal import dispose, judge_unjudged
from snodo.engine.execute import Executed, run_coder
from snodo.engine.interrupt import Interrupted
from snodo.engine.results import Halt, Progress, RunResult, finding, halt_for, plain_usage
from snodo.engine.worktree import Worktree, create_worktree, reclaim_abandoned
from snodo.evidence.attest import attest_run
from snodo.governance.service import Project, ValidationOutcome, persist_escalation, validate_task
from snodo.plugin.records import CoderRequest, CoderSpec
from snodo.rules.taskids import check_task_id, derive_task_id, spec_sha256
from snodo.workspace import PathGuard
from snodo.workspace.gitmeta import GitMetadataRefused, GitMetaWatch


class Engine:
    """Runs tasks for one :class:`Project` (protocol, mode, plugins, state)."""

    def __init__(
        self,
        project: Project,
        *,
        coder: str | None = None,
        progress: Progress | None = None,
        job_id: str | None = None,
        branch: str | None = None,
    ) -> None:
        self.project = project
        self.branch = branch  # what completed work is named (`run --branch`); else snodo/<task>-<run>
        self.coder_name = coder or project.mode.coder
        report = progress or (lambda _msg: None)
        self.activity = ""  # the last thing reported: what was running if the run is interrupted

        def tracked(msg: str) -> None:
            self.activity = msg
            report(msg)

        self.progress: Progress = tracked
        self.job_id = job_id
        self.run_id = secrets.token_hex(4)
        #: the git tree the last post_execute verdict judged: the only tree a completed run attests
        self.judged_tree = ""
        self.attempt = 0
        self.usage: list[dict[str, Any]] = []
        self.phase = "governance"
        self.spec_text = self.task_id = ""
        self.coder_head: str | None = None  # the working copy's tip after a coder's own commits
        # What the attempts built up: what the next one is told, the stall check's last signature,
        # the files changed, the writes refused, the commit judged.
        self.findings: tuple[str, ...] = ()
        self.last_signature: tuple[Any, ...] | None = None
        self.files: set[str] = set()
        self.dropped: tuple[dict[str, str], ...] = ()
        self.commit: str | None = None

    def run(self, spec: str, *, task_id: str | None = None) -> RunResult:
        task_id = check_task_id(task_id) if task_id else derive_task_id(spec)
        self.spec_text, self.task_id = spec, task_id
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
        try:
            coder_spec = self.project.host.coder(self.coder_name)
            # The mode's coder_config belongs to the mode's coder; an override starts clean.
            config = p.mode.coder_config if coder_spec.name == p.mode.coder else freeze({})
            check_before_run(p, coder_spec, config)
            for gone in reclaim_abandoned(
                p.root, p.home, judge=lambda left: judge_unjudged(p, left, (), self.spec_text)
            ):
                p.record("worktree_reclaimed", **gone)
                self.progress(f"removed the working copy of run {gone['run_id']}, whose process had died")
            worktree = create_worktree(p.root, p.home, task_id, self.run_id)
            worktree.branch = self.branch or worktree.branch
            self.progress(f"working copy {worktree.path} (run {self.run_id})")
            result = self._loop(coder_spec, config, worktree)
            self._complete(result, worktree)
            return result
        except Interrupted as stop:
            phase = "execute" if self.activity.startswith("coder") else self.phase
            message = f"interrupted by {stop.signal_name} during {phase}"
            if self.activity:
                message += f" ({self.activity})"
            return self._halted(Halt("interrupted", phase, message), worktree)
        except Exception as exc:  # fail closed: an unexpected fault halts and is audited
            return self._halted(halt_for(exc), worktree)
        finally:
            if worktree is not None:
                self._note_left_out(worktree.left_out)  # read by a status beside the run
                worktree.remove()

    def _complete(self, result: RunResult, worktree: Worktree) -> None:
        worktree.keep_as_branch()
        completed = self.project.record(
            "completed",
            task_id=self.task_id,
            run_id=self.run_id,
            branch=result.branch,
            commit=result.commit,
            files=list(result.files),
            attempts=result.attempts,
        )
        attest_run(
            self.project,
            base=worktree.base,
            tip=worktree.branch,
            made=change.made_since(worktree.base, worktree.tip()),
            task_id=self.task_id,
            spec_sha=spec_sha256(self.spec_text),
            run_id=self.run_id,
            coder=self.coder_name,
            reason=result.message,
            results=result.results,
            audit=completed,
            judged_tree=self.judged_tree,
        )

    def _note_left_out(self, left_out: tuple[str, ...]) -> None:
        if left_out:
            shown = ", ".join(left_out[:5]) + (", …" if len(left_out) > 5 else "")
            self.progress(
                f"note: the run started from your last commit; {len(left_out)} uncommitted path(s) were "
                f"not part of it ({shown})"
            )

    def _validate(self, phase: str, workspace: Path, **given: Any) -> ValidationOutcome:
        """``validate_task`` for one phase; no git metadata the validators' code made may stay."""
        self.phase = phase
        self.progress(f"{phase} validation")
        watch = GitMetaWatch(workspace)
        try:
            outcome = validate_task(
                self.project,
                spec=self.spec_text,
                task_id=self.task_id,
                phase=phase,
                workspace=workspace,
                issue_token=(phase == "pre_execute"),
                progress=lambda msg, _r: self.progress(msg),
                **given,
            )
        except GitMetadataRefused as exc:  # planted in a validator's own copy of the tree
            self._refuse_git_metadata(phase, exc.found)
        for r in outcome.results:
            self._spent((r.details or {}).get("usage"), validator=r.validator_id, phase=phase)
        if found := watch.intruders():
            self._refuse_git_metadata(phase, found, outcome)
        return outcome

    def _refuse_git_metadata(
        self, phase: str, found: Sequence[tuple[str, str]], outcome: ValidationOutcome | None = None
    ) -> NoReturn:
        for path, reason in found:
            self.project.record(
                "path_refused", task_id=self.task_id, path=path, source=f"{phase}:validators", reason=reason
            )
        raise Halt("blocker", phase, GitMetadataRefused(list(found)).message, validation=outcome)

    def _loop(self, coder_spec: CoderSpec, config: dict[str, Any], wt: Worktree) -> RunResult:
        """Pre-validate and consume the token, then attempt and decide, until a verdict ends it."""
        self._pre_validate_and_consume(wt)
        guard = PathGuard(wt.path, self.project.protocol.protected_paths)
        ex = self.project.protocol.execution
        budget = min(ex.max_recovery_depth, ex.max_total_fix_attempts)
        while True:
            try:
                post, changed, ops = self._attempt(coder_spec, config, wt, guard)
            except CoderError as exc:  # the coder could not do it: another attempt, with why, while budgets last
                if self.attempt >= budget:
                    raise
                findings = (f"your previous attempt failed: {exc}",)
                self._recover(findings, f": the coder failed: {str(exc)[:200]}", self.last_signature)
                continue
            if (result := self._decide(wt, post, changed, ops, budget)) is not None:
                return result

    def _pre_validate_and_consume(self, wt: Worktree) -> None:
        """The pre_execute verdict, then the token consumed exactly once, or nothing runs."""
        p = self.project
        # A copy just restored (or made) is clean: no git needed to say so.
        pre = self._validate("pre_execute", wt.path, uncommitted=() if wt.clean_at_start else None, base=wt.base)
        if pre.status != "pass":
            raise Halt(pre.status, "pre_execute", pre.classification.reason, validation=pre)
        if pre.token is None:
            raise Halt("internal_error", "pre_execute", "validation passed but no token was issued", validation=pre)
        consumer = f"engine:{self.run_id}"
        try:
            claims = p.tokens.consume(pre.token, task_id=self.task_id, spec_sha256=pre.spec_sha256, consumer=consumer)
        except TokenError as exc:
            raise Halt("internal_error", "execute", f"the validation token was refused at execute: {exc}") from None
        p.record("token_consumed", task_id=self.task_id, jti=claims.jti, consumer=consumer)

    def _attempt(
        self, coder_spec: CoderSpec, config: dict[str, Any], wt: Worktree, guard: PathGuard
    ) -> tuple[ValidationOutcome, tuple[str, ...], tuple[Any, ...]]:
        """One coder attempt, committed; the post_execute verdict on the whole change so far,
        its files and the attempt's own change (for the stall check)."""
        p = self.project
        if self.attempt + 1 > p.protocol.execution.max_iterations:
            raise Halt("blocker", "post_execute", f"max_iterations ({p.protocol.execution.max_iterations}) reached")
        request = CoderRequest(
            task_id=self.task_id,
            spec=self.spec_text,
            workspace=wt.path,
            mode_id=p.mode_id,
            criteria=tuple(c for v in p.protocol.validators_for(p.mode, "post_execute") for c in v.criteria),
            guidance=p.mode.description,
            protected_paths=(".snodo/", ".git/", *p.protocol.protected_paths),
            config=config,
            findings=self.findings,
            attempt=self.attempt,
            log=lambda line: self.progress(f"coder: {line}"),
        )
        p.record(
            "dispatch",
            task_id=self.task_id,
            coder=coder_spec.name,
            attempt=self.attempt,
            run_id=self.run_id,
            findings=list(self.findings),
        )
        self.progress(f"coder {coder_spec.name} (attempt {self.attempt})")
        done = run_coder(p, coder_spec, request, wt, guard, spent=self._spent, progress=self.progress)
        self.coder_head = done.coder_head or self.coder_head
        made, all_changed, diff = self._commit(wt, guard, done)
        if not all_changed or self.commit is None:
            raise Halt("blocker", "execute", f"coder {coder_spec.name!r} produced no change; nothing to validate")
        # The commit just made is judged: its tree binds the verdict and any human decision.
        # Validators see a snapshot of that tree, HEAD's: nothing beyond the commit, no git needed to say so.
        post = self._validate(
            "post_execute",
            wt.path,
            changed_files=all_changed,
            diff=diff,
            escalate=False,
            tree=made.tree if made is not None else None,
            uncommitted=() if made is not None else None,
            base=wt.base,
            refused=self.dropped,
        )
        self.judged_tree = post.tree
        return post, all_changed, done.signature

    def _commit(
        self, wt: Worktree, guard: PathGuard, done: Executed
    ) -> tuple[change.Commit | None, tuple[str, ...], str]:
        """Commit what the attempt changed; that commit and the run's change (base against tip: files, patch)."""
        self.files |= set(done.changed)
        self.dropped = (*self.dropped, *done.dropped)
        self.commit = self.coder_head or self.commit
        made = None
        if done.changed:
            message = f"snodo: {self.task_id} attempt {self.attempt}\n\n{self.spec_text.strip()[:500]}"
            made = change.commit_paths(wt.path, guard, sorted(done.changed), message, base=wt.base)
        if made is not None:
            self.commit = made.commit
            self.project.record(
                "commit", task_id=self.task_id, branch=wt.branch, commit=made.commit, files=sorted(done.changed)
            )
            return made, made.files, made.diff
        if self.files and self.commit:
            return None, *change.compare(wt.path, wt.base, self.commit)
        return None, (), ""

    def _decide(
        self, wt: Worktree, post: ValidationOutcome, changed: tuple[str, ...], ops: tuple[Any, ...], budget: int
    ) -> RunResult | None:
        """Completed; a halt (blocker, validator_error, or an escalation once the budget is
        spent or the run stalls); or ``None``, another attempt told the findings."""
        results = tuple(r.for_agent() for r in post.results)
        if post.status == "pass":
            return RunResult(
                status="completed",
                task_id=self.task_id,
                phase="post_execute",
                branch=wt.branch,
                commit=self.commit,
                results=results,
                files=changed,
                attempts=self.attempt,
                job_id=self.job_id,
                message=post.classification.reason,
                dropped=self.dropped,
                usage=tuple(self.usage),
            )
        if post.status in ("blocker", "validator_error"):
            raise Halt(
                post.status,
                "post_execute",
                post.classification.reason,
                results=results,
                commit=self.commit,
                files=changed,
            )
        # escalate: recoverable by a fix attempt while budgets last.
        # Stall: the same verdicts (severities, not wording: test timings vary) after the same change.
        verdicts = tuple((r.validator_id, r.severity, r.severity_original) for r in post.results)
        signature = (verdicts, ops)
        stalled = signature == self.last_signature
        if self.attempt >= budget or stalled:
            why = "the same verdict after the same change" if stalled else f"{self.attempt} fix attempt(s) used"
            final = persist_escalation(self.project, post, self.spec_text)
            raise Halt(
                "escalate",
                "post_execute",
                f"recovery stopped ({why}): {post.classification.reason}",
                validation=final,
                commit=self.commit,
                files=changed,
            )
        findings = tuple(finding(r) for r in post.results if r.severity != "pass")
        self._recover(findings, f"/{budget}: {'; '.join(findings)[:200]}", signature)
        return None

    def _recover(self, findings: tuple[str, ...], said: str, signature: tuple[Any, ...] | None) -> None:
        self.attempt += 1
        self.project.record("recovery", task_id=self.task_id, attempt=self.attempt, findings=list(findings))
        self.progress(f"recovery attempt {self.attempt}{said}")
        self.findings, self.last_signature = findings, signature

    def _spent(self, reported: Any, **who: str) -> None:
        """Record what a coder (``coder=``) or a judge (``validator=``, ``phase=``) spent in this attempt."""
        usage = plain_usage(reported)
        if not usage:
            return
        entry = {"attempt": self.attempt, **who, **usage}
        self.usage.append(entry)
        event = "coder_usage" if "coder" in who else "judge_usage"
        self.project.record(event, task_id=self.task_id, run_id=self.run_id, **entry)

    def _halted(self, halt: Halt, wt: Worktree | None) -> RunResult:
        kept_ref, discarded = dispose(self.project, wt, halt.results, halt.files, self.spec_text, self.progress)
        result = RunResult(
            status="halted",
            task_id=self.task_id,
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
            task_id=self.task_id,
            run_id=self.run_id,
            outcome=halt.outcome,
            phase=halt.phase,
            message=halt.message,
            decision_id=halt.decision_id,
            halted_ref=kept_ref,
            discarded=bool(discarded),
        )
        return result
