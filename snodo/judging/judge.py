"""Judging a change by its tests against the base, in copies snodo writes (docs/judging.md)."""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import shutil
import tempfile
import time
from collections import Counter
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from attrs import Factory, asdict, frozen

from snodo.base.errors import ValidatorFault
from snodo.workspace.pysetup import PythonSetup

from .cache import BaseResult, Shared, base_key, load_base, store_base
from .layout import MAX_SHOWN, Layout, Rules, escalations, rewritten, split
from .record import FAILED, PASSED, Session, first_line
from .session import Outcome, run_session
from .tooling import DOCS, Options, command_argv, held_out_digest, held_out_files, named_tests, pytest_tooling
from .tree import Blobs, Entry, entries, resolve, tree_of, write_copy


@frozen(kw_only=True)
class Judgement:
    """The verdict the tests support, and what it rests on."""

    severity: str  # pass | warn | blocker
    escalate: bool
    justification: str
    details: Mapping[str, Any] = Factory(dict)
    private: Mapping[str, Any] = Factory(dict)

    command_argv = staticmethod(command_argv)
    pytest_tooling = staticmethod(pytest_tooling)


class Judge:
    """One judgement: the base, the change, their copies in one private directory."""

    def __init__(
        self, repo: Path, *, base: str, tree: str, project_root: Path, options: Options, spec: str, cache: Path | None
    ) -> None:
        self.repo = repo
        self.base_commit = resolve(repo, base)
        self.base_tree = tree_of(repo, self.base_commit)
        self.tree = tree
        self.project_root = project_root
        self.opts = options
        self.named = named_tests(spec)
        self.cache = cache
        self.blobs = Blobs(repo)
        self.deadline = time.monotonic() + max(options.timeout - 1.0, 1.0)
        self.scratch = Path(tempfile.mkdtemp(prefix="snodo-judge-"))
        self.blockers: list[str] = []
        self.escalations: list[tuple[str, str]] = []
        self.details: dict[str, Any] = {}
        self.private: dict[str, Any] = {}
        self.added_excerpt = ""

    def close(self) -> None:
        shutil.rmtree(self.scratch, ignore_errors=True)

    def _left(self) -> float:
        return self.deadline - time.monotonic()

    def _copy(self, files: Mapping[str, Entry], extra: Mapping[str, bytes] = {}) -> Path:
        dest = Path(tempfile.mkdtemp(prefix="copy-", dir=self.scratch))
        write_copy(dest, files, self.blobs)
        for rel, data in extra.items():  # a link or file of the change in the way is replaced, never followed
            *parents, name = rel.split("/")
            here = dest
            for part in parents:
                here = here / part
                if os.path.islink(here) or (os.path.lexists(here) and not os.path.isdir(here)):
                    os.unlink(here)
                if not os.path.lexists(here):
                    os.mkdir(here)
            target = here / name
            if os.path.isdir(target) and not os.path.islink(target):
                shutil.rmtree(target)
            elif os.path.lexists(target):
                os.unlink(target)
            with os.fdopen(os.open(target, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o644), "wb") as fh:
                fh.write(data)
        return dest

    def _run(self, copy: Path, args: Sequence[str], limit: float) -> tuple[Outcome, PythonSetup]:
        setup = self.opts.setup(copy, self.project_root)
        timeout = min(limit, self._left())
        if timeout < 1:
            raise ValidatorFault(
                f"the tests' time budget ({self.opts.timeout:g} s) ran out before they could be judged",
                hint=f"raise tooling.timeout; see {DOCS}",
            )
        hidden = (self.opts.held_out,) if self.opts.held_out is not None else ()
        return run_session(copy, setup, args, timeout=timeout, hidden=hidden, checkout=self.project_root), setup

    def base_result(self, base: Mapping[str, Entry]) -> BaseResult:
        """The base's per-test results, cached or run now (failures twice: flaky ones are not required)."""
        key = base_key(self.base_tree, self.opts.setup(self.project_root, self.project_root).python, self.opts)
        if (cached := load_base(self.cache, key)) is not None:
            return cached
        copy = self._copy(base)
        roots = tuple(_relative(p, copy) for p in self.opts.setup(copy, self.project_root).pythonpath)
        started = time.monotonic()
        outcome, _ = self._run(copy, self.opts.pytest_args(None), self._left() * 0.6)
        session = self._base_session(outcome, copy)
        failing = session.failed()
        flaky: list[str] = []
        if failing and len(failing) <= 200:
            again, _ = self._run(self._copy(base), self.opts.pytest_args(session, failing), self._left() * 0.5)
            if again.session is not None:
                flaky = [t for t in failing if again.session.status.get(t) == PASSED]
        result = BaseResult(session=session, roots=roots, flaky=tuple(flaky), duration=time.monotonic() - started)
        with contextlib.suppress(OSError):
            store_base(self.cache, key, result)
        return result

    def _base_session(self, outcome: Outcome, copy: Path) -> Session:
        session = outcome.session
        if session is None:
            raise ValidatorFault(
                f"the base's tests ({self.base_commit[:12]}) could not be judged: {outcome.problem}, so there is no "
                f"verdict on the change:\n{outcome.tail}",
                hint=f"run the tests at the base by hand and fix what fails to start; see {DOCS}",
            )
        if session.foreign:
            raise ValidatorFault(foreign_message(session.foreign, copy))
        if session.collect_errors and not session.passing():
            shown = "\n".join(f"{k}: {first_line(v)[2:]}" for k, v in list(session.collect_errors.items())[:5])
            raise ValidatorFault(
                f"the base's tests ({self.base_commit[:12]}) could not be collected, so there is no verdict on the "
                f"change:\n{shown}",
                hint=f"check the interpreter (execution.python) has the project's dependencies and that the tests "
                f"import the code under judgement (tooling.pythonpath); see {DOCS}",
            )
        return session

    def judge(self) -> Judgement:
        base, change = entries(self.repo, self.base_tree), entries(self.repo, self.tree)
        result = self.base_result(base)
        bs = result.session
        rules = Rules(base, bs)
        layout = split(rules, change, import_roots=result.roots, external=bs.outside)
        self.escalations = escalations(layout, base, change, self.blobs, bs.files)
        required = bs.passing() - set(result.flaky)
        self.details = {
            "base": self.base_commit,
            "tree": self.tree,
            "base_cached": result.cached,
            "base_passing": len(required),
        }
        limit = max(60.0, 10 * result.duration)
        later = bool(layout.added_tests) or self.opts.held_out is not None
        after = self._main(layout, rules, base, min(limit, self._left() * (0.6 if later else 1.0)), limit)
        broken, fixed = self._against_base(after, bs, required) if after is not None else ([], 0)
        self.details.update(broken=broken[:200], newly_passing=fixed)
        summary = self._summary(after, required, broken, fixed, len(result.flaky))
        if layout.added_tests and not self.blockers:
            summary += self._added(layout, change, limit)
        if self.opts.held_out is not None and not self.blockers:
            summary += self._held_out(layout, bs, limit)
        empty = after is not None and not after.status and not later
        return self._verdict(summary, empty=empty)

    def _main(
        self, layout: Layout, rules: Rules, base: Mapping[str, Entry], run_limit: float, limit: float
    ) -> Session | None:
        """The base's tests against the change's source; ``None`` when the run did not finish."""
        copy = self._copy(layout.main)
        outcome, setup = self._run(copy, self.opts.pytest_args(rules.session), run_limit)
        self.details["python"] = f"{setup.python} ({setup.python_source})"
        self.details["pythonpath"] = [os.path.relpath(p, setup.workspace) for p in setup.pythonpath]
        self.details.update(exit_code=outcome.exit_code, output_tail=outcome.tail)
        what = "the base's tests against the change"
        if outcome.session is None and not outcome.timed_out and self._left() > 5:
            again, _ = self._run(self._copy(base), self.opts.pytest_args(None), limit)
            if again.session is None:  # the environment's fault, not the change's
                raise ValidatorFault(
                    f"{what} did not finish ({outcome.problem}), and neither did the base's when run again, so "
                    f"there is no verdict:\n{outcome.tail}",
                    hint=f"run the tests by hand at the base; see {DOCS}",
                )
        changed = rewritten(copy, layout.main, rules, self.blobs)
        if changed:
            shown = ", ".join(changed[:MAX_SHOWN])
            self.blockers.append(f"the code under test changed the tests or their harness while they ran: {shown}")
        if outcome.session is None:
            self.blockers.append(f"{what}: {outcome.problem} (the base's own run finished)")
        return outcome.session

    def _against_base(self, after: Session, bs: Session, required: frozenset[str]) -> tuple[list[str], int]:
        """Which base-passing tests broke, and how many more pass now."""
        if after.foreign:
            shown = "; ".join(f"{k} from {v}" for k, v in sorted(after.foreign.items())[:5])
            self.blockers.append(
                f"the tests imported the project's own code from outside the judged copy: {shown} "
                "(tooling.pythonpath names the import roots)"
            )
        names = [t for t in sorted(required) if after.status.get(t) != PASSED]
        broken = [f"{t} ({after.status.get(t, 'not collected')}){first_line(after.messages.get(t))}" for t in names]
        fixed = len(after.passing() - required)
        if self.opts.require_all:
            self._before_work(after)
        self._named(bs, after)
        if broken:
            more = f"; and {len(broken) - MAX_SHOWN} more" if len(broken) > MAX_SHOWN else ""
            self.blockers.append(
                f"{len(broken)} test(s) that pass at the base do not pass after the change: "
                + "; ".join(broken[:MAX_SHOWN])
                + more
            )
        self.details.update(
            after=dict(Counter(after.status.values())),
            summary=after.tally(),
            failed_tests=names[:50],
            output_excerpt=after.failures(names),
        )
        return broken, fixed

    def _before_work(self, after: Session) -> None:
        """Before the work (pre_execute) every failing test blocks."""
        failing = after.problems(FAILED)
        if failing:
            shown = "; ".join(sorted(failing)[:MAX_SHOWN])
            self.blockers.append(f"{len(failing)} test(s) fail before any work: {shown}")

    def _summary(
        self, after: Session | None, required: frozenset[str], broken: list[str], fixed: int, flaky: int
    ) -> str:
        if after is None:  # then nothing is fixed either
            summary = "the base's tests could not be run against the change"
        else:
            summary = f"{len(required) - len(broken)} of {len(required)} base-passing test(s) pass"
            summary += (f", {fixed} more pass now" if fixed else "") + f" ({after.tally()})"
        flaky_note = f" ({flaky} flaky at the base, not required)" if flaky else ""
        return f"against base {self.base_commit[:12]}: {summary}{flaky_note}"

    def _named(self, base: Session, after: Session) -> None:
        """Every test the task names must pass; one the base and the held-out tests lack is for a person."""
        held = held_out_files(self.opts.held_out)
        for name in self.named:
            path = name.split("::", 1)[0]
            at_base = _matching(base.status, name)
            if not at_base and path in base.collect_errors:
                # the base could not import the module: the named tests must be collected and pass now
                at_base = _matching(after.status, name)
                if not at_base:
                    self.blockers.append(f"test(s) the task names are not collected after the change: {name}")
                    continue
            if not at_base and path not in held:
                self.escalations.append((f"the task names {name}, which the base does not have", ""))
            bad = [f"{t} ({after.status.get(t, 'not collected')})" for t in at_base if after.status.get(t) != PASSED]
            if bad:
                self.blockers.append("test(s) the task names do not pass: " + "; ".join(bad[:MAX_SHOWN]))

    def _added(self, layout: Layout, change: Mapping[str, Entry], limit: float) -> str:
        """Added test modules, in a session of their own: they must pass."""
        files = {**layout.main, **{p: change[p] for p in layout.added_tests}}
        outcome, _ = self._run(self._copy(files), self.opts.pytest_args(None, layout.added_tests), limit)
        s = outcome.session
        if s is None:
            self.blockers.append(f"the added tests: {outcome.problem}")
            return ""
        failed = s.problems((*FAILED, "xpassed", "not run"), why=True)
        if failed:
            self.blockers.append(f"added tests fail: {'; '.join(failed[:MAX_SHOWN])}")
        collected = {t.split("::", 1)[0] for t in s.status}
        self.escalations += [
            (f"added {p} is named like a test module but holds no test", "")
            for p in layout.added_tests
            if p not in collected
        ]
        self.added_excerpt = s.failures([t for t, st in s.status.items() if st != PASSED])
        return f"; added tests: {len(s.passing())} of {len(s.status)} passed"

    def _held_out(self, layout: Layout, bs: Session, limit: float) -> str:
        """Held-out tests, in a copy of their own: the agent learns only how many passed."""
        files = held_out_files(self.opts.held_out)
        rules = Rules({}, bs)
        tests = sorted(p for p in files if rules.test_module(p))
        if not tests:
            raise ValidatorFault(
                f"tooling.held_out {self.opts.held_out} holds no test module "
                f"(named like {', '.join(rules.python_files)})",
                hint=f"lay the held-out tests out like the repository, e.g. tests/test_hidden.py; see {DOCS}",
            )
        outcome, _ = self._run(self._copy(layout.main, files), self.opts.pytest_args(bs, tests), limit)
        s = outcome.session
        if s is None:
            self.private = {"held_out": {"problem": outcome.problem, "tail": outcome.tail}}
            self.blockers.append("held-out tests: the run did not finish")
            return "; held-out: the run did not finish"
        self.private = {
            "held_out": {
                "status": dict(s.status),
                "messages": {t: m[:2000] for t, m in list(s.messages.items())[:50]},
                "collect_errors": dict(s.collect_errors),
            }
        }
        passed, total = len(s.passing()), len(s.status) + len(s.collect_errors)
        if passed != total or total == 0:
            self.blockers.append(f"held-out: {passed} of {total} passed")
        return f"; held-out: {passed} of {total} passed"

    def _verdict(self, summary: str, *, empty: bool) -> Judgement:
        """Blockers block; else escalations ask a person; else a run that collected nothing verifies nothing."""
        self.details["escalations"] = [{"what": w, "shown": s} for w, s in self.escalations]
        if self.added_excerpt:
            self.details["added_tests_output"] = self.added_excerpt
        severity, escalate, text = "pass", False, "tests judged " + summary
        shown = [w for w, _ in self.escalations[:MAX_SHOWN]]
        if self.blockers:
            severity, text = "blocker", text + "\n" + "\n".join(f"- {b}" for b in self.blockers)
            if shown:
                text += "\nalso for a person: " + "; ".join(shown)
        elif shown:
            severity, escalate = "warn", True
            text += (
                "\nA person must look at what the change does to the tests or their harness "
                "(the diff is in this result's details):\n" + "\n".join(f"- {w}" for w in shown)
            )
        elif empty:
            severity, text = "warn", "no tests collected, at the base or after the change; nothing was verified"
        return Judgement(
            severity=severity, escalate=escalate, justification=text, details=self.details, private=self.private
        )


def _matching(status: Mapping[str, str], name: str) -> list[str]:
    return [t for t in status if t == name or t.startswith((name + "::", name + "["))]


def _relative(path: str, root: Path) -> str:
    rel = os.path.relpath(path, root).replace(os.sep, "/")
    return "" if rel == "." else rel


def foreign_message(foreign: Mapping[str, str], where: Path) -> str:
    """Why a run that imported the project from elsewhere proves nothing, and the fix."""
    shown = "; ".join(f"{k} from {v}" for k, v in sorted(foreign.items())[:5])
    return (
        f"the tests imported the project's own code from outside {where}: {shown}. Their result says nothing "
        "about this work. Put the import roots on the path with tooling.pythonpath (e.g. [src]), do not add "
        f"other checkouts to sys.path in conftest.py, and check the interpreter's environment; see {DOCS}"
    )


#: Judgements of this process by everything they depend on.
_SHARED = Shared()


def judge_change(judge: Judge) -> Judgement:
    """``judge``'s verdict, or the one this process has for the same change and options (then
    shared); :class:`ValidatorFault` only when there is no verdict. ``judge`` is closed."""
    held = held_out_digest(judge.opts.held_out)
    material = [str(judge.repo), judge.base_commit, judge.tree, asdict(judge.opts), held, judge.named]
    key = hashlib.sha256(json.dumps([*material, str(judge.project_root)], default=str).encode()).hexdigest()
    with contextlib.closing(judge):
        return _SHARED.get(key, judge.judge)


__all__ = ["Judge", "Judgement", "Options", "judge_change"]
