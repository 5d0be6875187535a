"""Judging a change by its tests, against the base, in copies snodo lays out itself.

1. The base's per-test results: its tree exported alone and run by the same judge
   (failures run once more: a test that passes then is flaky and not required), kept in the
   cache directory snodo gives (``$SNODO_HOME/judging``, hidden from confined code) by base
   tree, judge, options and interpreter environment, and only once the run finished and
   proved itself.
2. The change split (:mod:`.layout`): harness and test area taken from the base, added test
   modules apart, bytecode left out; what a person must see escalates with its diff.
3. The base's tests run against the change's source; every test that passed at the base
   must pass, and every test the task names.
4. Added test modules run in a session of their own; held-out tests in a copy of their own.
5. A run that does not finish or does not prove itself is a blocker once the base's run
   finished — unless the base, run again, fails the same way: then it is no verdict.

Every copy is written from git's object store into a private temporary directory, so the
bytes judged are the judged tree's and nothing another process does to a work tree
changes them.
"""

from __future__ import annotations

import contextlib
import difflib
import fnmatch
import hashlib
import json
import os
import re
import shutil
import tempfile
import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from attrs import Factory, frozen

from snodo.base.errors import ValidatorFault
from snodo.workspace.pysetup import PythonSetup, python_setup

from . import scan
from .layout import Layout, Rules, split
from .record import PASSED, Session
from .session import BOOT, Outcome, run_session
from .tooling import command_argv, pytest_tooling
from .tree import SYMLINK, Blobs, Entry, entries, resolve, tree_of, write_copy

#: Bumped when what the judge records changes: older cached base results are not used.
JUDGE_VERSION = "2"
DOCS = "docs/judging.md"
_REPORTING = re.compile(r"^(-q+|-v+|--quiet|--verbose|-r\S*|--tb=\S+|--color=\S+|-s|--capture=\S+|--durations=\S+)$")
_VALUED = frozenset(
    {"-k", "-m", "-p", "-o", "-W", "--deselect", "--ignore", "--ignore-glob", "--maxfail", "-r", "--tb"}
)
_NODE_ID = re.compile(r"(?<![\w./-])((?:[\w.-]+/)*[\w.-]+\.py)(::[\w.:-]*\w(?:\[[^\]\s]*\])?)?")
MAX_DIFF_LINES = 120
MAX_SHOWN = 20


@frozen(kw_only=True)
class Options:
    """How tests are run: the protocol's pytest options and positional paths, the plugins it
    names (autoload is off), the time budget and the held-out directory."""

    options: tuple[str, ...] = ()
    paths: tuple[str, ...] = ()
    plugins: tuple[str, ...] = ()
    timeout: float = 300.0
    held_out: Path | None = None
    python: Any = None
    pythonpath: Any = None
    execution_python: Any = None
    #: before the work (pre_execute): the starting point itself is judged, so every test that
    #: fails or errors now blocks, not only those that passed at the base
    require_all: bool = False

    def pytest_args(self, session: Session | None, paths: Sequence[str] | None = None) -> list[str]:
        # a test module that cannot be imported (a name the task has yet to add) must not
        # keep the other modules from running: its tests are simply not collected
        args = ["-p", "no:cacheprovider", "-q", "--continue-on-collection-errors"]
        if session is not None:
            if session.inifile:
                args += ["-c", session.inifile]
            args += ["--rootdir", session.rootdir]
        for plugin in self.plugins:
            args += ["-p", plugin]
        args += list(self.options)
        args += list(self.paths if paths is None else paths)
        return args

    def key(self) -> dict[str, Any]:
        """What the base's results depend on (``require_all`` only changes how they are read)."""
        return {"options": self.options, "paths": self.paths, "plugins": self.plugins}


def options_from_command(argv: Sequence[str]) -> tuple[tuple[str, ...], tuple[str, ...]] | None:
    """pytest's options and paths from a test command (``python -m pytest …``, ``pytest …``);
    ``None`` when the command does not run pytest. Options that only change what pytest
    prints are dropped: the judge reads its own record, never the output."""
    rest: list[str]
    if len(argv) >= 3 and argv[1] == "-m" and argv[2] in ("pytest", "py.test"):
        rest = list(argv[3:])
    elif argv and os.path.basename(argv[0]) in ("pytest", "py.test"):
        rest = list(argv[1:])
    else:
        return None
    options: list[str] = []
    paths: list[str] = []
    i = 0
    while i < len(rest):
        arg = rest[i]
        if arg in _VALUED and i + 1 < len(rest):
            if arg not in ("-r", "--tb"):
                options += [arg, rest[i + 1]]
            i += 2
            continue
        if arg.startswith("-"):
            if not _REPORTING.match(arg):
                options.append(arg)
        else:
            paths.append(arg)
        i += 1
    return tuple(options), tuple(paths)


def named_tests(spec: str) -> tuple[str, ...]:
    """Test node ids and test files the task's text names (``tests/test_a.py::test_b``)."""
    found = []
    for m in _NODE_ID.finditer(spec):
        path, rest = m.group(1), m.group(2) or ""
        name = os.path.basename(path)
        if rest or fnmatch.fnmatchcase(name, "test_*.py") or fnmatch.fnmatchcase(name, "*_test.py"):
            found.append(path + rest.rstrip(".,:;"))
    return tuple(dict.fromkeys(found))


@frozen(kw_only=True)
class Judgement:
    """The verdict the tests support, and what it rests on."""

    severity: str  # pass | warn | blocker
    escalate: bool
    justification: str
    details: Mapping[str, Any] = Factory(dict)
    private: Mapping[str, Any] = Factory(dict)

    #: a ``tooling.command`` (a string or a list) as argv, shell syntax refused
    command_argv = staticmethod(command_argv)
    #: the tooling of the phase's pytest validator, so a validator needing test results
    #: asks for the same judgement and shares its run
    pytest_tooling = staticmethod(pytest_tooling)


class _Budget:
    def __init__(self, seconds: float) -> None:
        self.deadline = time.monotonic() + seconds

    def left(self) -> float:
        return self.deadline - time.monotonic()


# ------------------------------------------------------------------ the base


def _interpreter_stamp(python: str) -> list[Any]:
    """What the interpreter environment is: the executable, its environment's ``pyvenv.cfg``
    and the names of what is installed in it (a ``*.dist-info`` name carries the version)."""
    real = os.path.realpath(python)
    prefix = os.path.dirname(os.path.dirname(python))
    stamp: list[Any] = [python, real]
    for path in (real, os.path.join(prefix, "pyvenv.cfg")):
        with contextlib.suppress(OSError):
            st = os.stat(path)
            stamp.append([path, st.st_size, st.st_mtime_ns])
    lib = Path(prefix) / "lib"
    with contextlib.suppress(OSError):
        for site in sorted(lib.glob("python3*/site-packages")):
            stamp.append([str(site), sorted(os.listdir(site))])
    return stamp


def _base_key(base_tree: str, python: str, opts: Options) -> str:
    """The import roots are no part of it: the base's tree and ``tooling.pythonpath``
    decide them."""
    boot = hashlib.sha256(BOOT.read_bytes()).hexdigest()
    material = {
        "judge": JUDGE_VERSION,
        "boot": boot,
        "tree": base_tree,
        "interpreter": _interpreter_stamp(python),
        "pythonpath": opts.pythonpath,
        "options": opts.key(),
    }
    return hashlib.sha256(json.dumps(material, sort_keys=True, default=str).encode()).hexdigest()


@frozen(kw_only=True)
class BaseResult:
    session: Session
    roots: tuple[str, ...] = ("",)  # the import roots, relative to the copy ("": the copy itself)
    flaky: tuple[str, ...] = ()
    duration: float = 0.0
    cached: bool = False


def _cache_path(cache: Path, key: str) -> Path:
    return cache / "base" / f"{key}.json"


def _store(path: Path, data: Any) -> None:
    """Written whole or not at all (a temporary file renamed into place). Not
    :mod:`snodo.state.atomic`: the plugin API reaches the judge, and it must not import state
    (an import-linter contract)."""
    path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    fd, temp = tempfile.mkstemp(dir=path.parent, prefix=".tmp-")
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as out:
            json.dump(data, out)
            out.flush()
            os.fsync(out.fileno())
        os.replace(temp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(temp)
        raise


def _load_cached(cache: Path, key: str) -> BaseResult | None:
    path = _cache_path(cache, key)
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
        return BaseResult(
            session=Session.from_json(data["session"]),
            roots=tuple(data["roots"]),
            flaky=tuple(data.get("flaky") or ()),
            duration=float(data.get("duration") or 0.0),
            cached=True,
        )
    except Exception:  # a missing or unreadable cache entry is computed again
        return None


# ------------------------------------------------------------------ judging


class Judge:
    """One judgement: the base, the change, their copies in one private directory."""

    def __init__(
        self,
        repo: Path,
        *,
        base: str,
        tree: str,
        project_root: Path,
        options: Options,
        spec: str,
        cache: Path | None,
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
        self.budget = _Budget(max(options.timeout - 1.0, 1.0))
        self.scratch = Path(tempfile.mkdtemp(prefix="snodo-judge-"))
        self._copies = 0
        self.added_excerpt = ""

    def close(self) -> None:
        shutil.rmtree(self.scratch, ignore_errors=True)

    # -- copies and sessions

    def _copy(self, files: Mapping[str, Entry], extra: Mapping[str, bytes] = {}) -> Path:
        self._copies += 1
        dest = self.scratch / f"copy-{self._copies}"
        dest.mkdir()
        write_copy(dest, files, self.blobs)
        for rel, data in extra.items():
            target = dest / rel
            target.parent.mkdir(parents=True, exist_ok=True)
            if target.is_symlink() or target.exists():
                target.unlink()
            target.write_bytes(data)
        return dest

    def _setup(self, copy: Path) -> PythonSetup:
        return python_setup(
            copy,
            project_root=self.project_root,
            python=self.opts.python,
            pythonpath=self.opts.pythonpath,
            execution_python=self.opts.execution_python,
        )

    def _run(self, copy: Path, args: Sequence[str], limit: float) -> tuple[Outcome, PythonSetup]:
        setup = self._setup(copy)
        timeout = min(limit, self.budget.left())
        if timeout < 1:
            raise ValidatorFault(
                f"the tests' time budget ({self.opts.timeout:g} s) ran out before they could be judged",
                hint=f"raise tooling.timeout; see {DOCS}",
            )
        hidden = (self.opts.held_out,) if self.opts.held_out is not None else ()
        outcome = run_session(copy, setup, args, timeout=timeout, hidden=hidden, checkout=self.project_root)
        return outcome, setup

    # -- the base

    def base_result(self, base: Mapping[str, Entry]) -> BaseResult:
        python = self._setup(self.project_root).python
        key = _base_key(self.base_tree, python, self.opts)
        cached = _load_cached(self.cache, key) if self.cache is not None else None
        if cached is not None:
            return cached
        copy = self._copy(base)
        setup = self._setup(copy)
        roots = tuple(_relative(p, copy) for p in setup.pythonpath)
        started = time.monotonic()
        outcome, _ = self._run(copy, self.opts.pytest_args(None), self.budget.left() * 0.6)
        if outcome.session is None:
            raise ValidatorFault(
                f"the base's tests ({self.base_commit[:12]}) could not be judged: {outcome.problem}, so there is no "
                f"verdict on the change:\n{outcome.tail}",
                hint=f"run the tests at the base by hand and fix what fails to start; see {DOCS}",
            )
        session = outcome.session
        if session.foreign:
            raise ValidatorFault(foreign_message(session.foreign, copy))
        if session.collect_errors and not session.passing():
            shown = "\n".join(f"{k}: {_first_line(v)[2:]}" for k, v in list(session.collect_errors.items())[:5])
            raise ValidatorFault(
                f"the base's tests ({self.base_commit[:12]}) could not be collected, so there is no verdict on the "
                f"change:\n{shown}",
                hint=f"check the interpreter (execution.python) has the project's dependencies and that the tests "
                f"import the code under judgement (tooling.pythonpath); see {DOCS}",
            )
        failing = [t for t, s in session.status.items() if s in ("failed", "error")]
        flaky: list[str] = []
        if failing and len(failing) <= 200:
            again, _ = self._run(self._copy(base), self.opts.pytest_args(session, failing), self.budget.left() * 0.5)
            if again.session is not None:
                flaky = [t for t in failing if again.session.status.get(t) == PASSED]
        result = BaseResult(session=session, roots=roots, flaky=tuple(flaky), duration=time.monotonic() - started)
        if self.cache is not None:
            with contextlib.suppress(OSError):
                _store(
                    _cache_path(self.cache, key),
                    {"session": session.as_json(), "roots": roots, "flaky": flaky, "duration": result.duration},
                )
        return result

    def _base_recurs(self, base: Mapping[str, Entry], limit: float) -> bool:
        """Whether the base, run again now, fails to finish the same way (then the change's
        failure to finish is the environment's, not the change's)."""
        outcome, _ = self._run(self._copy(base), self.opts.pytest_args(None), limit)
        return outcome.session is None

    # -- the whole judgement

    def judge(self) -> Judgement:
        base = entries(self.repo, self.base_tree)
        change = entries(self.repo, self.tree)
        base_result = self.base_result(base)
        bs = base_result.session
        rules = Rules(base, bs)
        layout = split(rules, change, import_roots=base_result.roots, external=bs.outside)
        escalations = self._escalations(layout, base, change, bs)
        blockers: list[str] = []
        details: dict[str, Any] = {
            "base": self.base_commit,
            "tree": self.tree,
            "base_cached": base_result.cached,
            "base_passing": len(bs.passing() - set(base_result.flaky)),
        }
        private: dict[str, Any] = {}
        limit = max(60.0, 10 * base_result.duration)

        later = bool(layout.added_tests) or self.opts.held_out is not None
        main_limit = min(limit, self.budget.left() * (0.6 if later else 1.0))
        judged_copy = self._copy(layout.main)
        outcome, setup = self._run(judged_copy, self.opts.pytest_args(bs), main_limit)
        details["python"] = f"{setup.python} ({setup.python_source})"
        details["pythonpath"] = [os.path.relpath(p, setup.workspace) for p in setup.pythonpath]
        main = self._finished(outcome, base, limit, "the base's tests against the change")
        rewritten = self._rewritten(judged_copy, layout.main, rules)
        if rewritten:
            blockers.append(
                "the code under test changed the tests or their harness while they ran: "
                + ", ".join(rewritten[:MAX_SHOWN])
            )
        required = bs.passing() - set(base_result.flaky)
        broken: list[str] = []
        fixed = 0
        if main.session is not None:
            found, named_escalations, broken, fixed = self._against_base(main.session, bs, required, details)
            blockers += found
            escalations += named_escalations
        else:
            blockers.append(main.problem)
        details["exit_code"] = outcome.exit_code
        details["output_tail"] = outcome.tail
        if broken:
            blockers.append(
                f"{len(broken)} test(s) that pass at the base do not pass after the change: "
                + "; ".join(broken[:MAX_SHOWN])
                + (f"; and {len(broken) - MAX_SHOWN} more" if len(broken) > MAX_SHOWN else "")
            )
        details["broken"] = broken[:200]
        details["newly_passing"] = fixed

        added_note = ""
        if layout.added_tests and not blockers:
            added_note, added_block, added_esc = self._added(layout, limit)
            blockers += added_block
            escalations += added_esc
        held_note = ""
        if self.opts.held_out is not None and not blockers:
            held_note, held_block, private = self._held_out(layout, bs, limit)
            blockers += held_block
        details["escalations"] = [{"what": w, "shown": s} for w, s in escalations]
        if self.added_excerpt:
            details["added_tests_output"] = self.added_excerpt
        summary = self._summary(main.session, required, broken, fixed) + added_note + held_note
        if base_result.flaky:
            summary += f" ({len(base_result.flaky)} flaky at the base, not required)"
        empty = main.session is not None and not main.session.status and not layout.added_tests and not held_note
        return _verdict(summary, blockers, escalations, empty=empty, details=details, private=private)

    def _against_base(
        self, after: Session, bs: Session, required: frozenset[str], details: dict[str, Any]
    ) -> tuple[list[str], list[tuple[str, str]], list[str], int]:
        """The change's run compared with the base's: what blocks, what a person must see,
        which base-passing tests broke and how many more pass now (``details`` filled in)."""
        blockers: list[str] = []
        broken: list[str] = []
        if after.foreign:
            shown = "; ".join(f"{k} from {v}" for k, v in sorted(after.foreign.items())[:5])
            blockers.append(
                f"the tests imported the project's own code from outside the judged copy: {shown} "
                "(tooling.pythonpath names the import roots)"
            )
        for test in sorted(required):
            status = after.status.get(test, "not collected")
            if status != PASSED:
                broken.append(f"{test} ({status}){_first_line(after.messages.get(test))}")
        fixed = len([t for t, s in after.status.items() if s == PASSED and t not in required])
        if self.opts.require_all:
            failing = [f"{t} ({s})" for t, s in after.status.items() if s in ("failed", "error")]
            failing += [f"{t}: could not be collected" for t in after.collect_errors]
            if failing:
                blockers.append(
                    f"{len(failing)} test(s) fail before any work: " + "; ".join(sorted(failing)[:MAX_SHOWN])
                )
        named_problems, named_escalations = self._named(bs, after)
        blockers += named_problems
        details["after"] = _tally(after)
        details["summary"] = after.tally()
        details["failed_tests"] = [t.split(" (", 1)[0] for t in broken][:50]
        details["output_excerpt"] = _excerpt(after, [t.split(" (", 1)[0] for t in broken])
        return blockers, named_escalations, broken, fixed

    def _summary(self, after: Session | None, required: frozenset[str], broken: list[str], fixed: int) -> str:
        """One line: how the base-passing tests fared and what more passes."""
        if after is not None:
            summary = (
                f"against base {self.base_commit[:12]}: {len(required) - len(broken)} of {len(required)} "
                "base-passing test(s) pass"
            )
        else:
            summary = f"against base {self.base_commit[:12]}: the base's tests could not be run against the change"
        if fixed:
            summary += f", {fixed} more pass now"
        if after is not None:
            summary += f" ({after.tally()})"
        return summary

    def _finished(self, outcome: Outcome, base: Mapping[str, Entry], limit: float, what: str) -> _Finished:
        if outcome.session is not None:
            return _Finished(outcome.session, "")
        if not outcome.timed_out and self.budget.left() > 5 and self._base_recurs(base, limit):
            raise ValidatorFault(
                f"{what} did not finish ({outcome.problem}), and neither did the base's when run again, so there "
                f"is no verdict:\n{outcome.tail}",
                hint=f"run the tests by hand at the base; see {DOCS}",
            )
        return _Finished(None, f"{what}: {outcome.problem} (the base's own run finished)")

    def _rewritten(self, copy: Path, files: Mapping[str, Entry], rules: Rules) -> list[str]:
        """Test-area and harness files of ``copy`` that are not, after the run, exactly what
        was laid out (changed, removed, or new: a ``conftest.py`` written during collection
        would have steered the rest of it)."""
        found: list[str] = []
        for path, entry in files.items():
            if not (rules.harness(path) or rules.in_test_area(path)) or entry.mode == SYMLINK:
                continue
            try:
                data = (copy / path).read_bytes() if not (copy / path).is_symlink() else None
            except OSError:
                data = None
            if data != self.blobs[entry.sha]:
                found.append(path)
        for dirpath, dirnames, filenames in os.walk(copy):
            dirnames[:] = [d for d in dirnames if d not in ("__pycache__", ".pytest_cache")]
            for name in filenames:
                rel = Path(dirpath, name).relative_to(copy).as_posix()
                if rel in files or name.endswith((".pyc", ".pyo")):
                    continue
                if rules.harness(rel) or (rules.in_test_area(rel) and rules.test_module(rel)):
                    found.append(rel)
        return sorted(found)

    def _blob(self, files: Mapping[str, Entry], path: str) -> bytes | None:
        entry = files.get(path)
        return None if entry is None else self.blobs[entry.sha]

    def _diff(self, base: Mapping[str, Entry], change: Mapping[str, Entry], path: str) -> str:
        old, new = self._blob(base, path), self._blob(change, path)
        return show_diff(path, old, new)

    def _escalations(
        self, layout: Layout, base: Mapping[str, Entry], change: Mapping[str, Entry], bs: Session
    ) -> list[tuple[str, str]]:
        out: list[tuple[str, str]] = []
        for path in layout.harness_changed:
            out.append((f"test harness changed: {path}", self._diff(base, change, path)))
        for path in layout.tests_changed:
            what = "deleted" if path not in change else "changed"
            out.append((f"test {what}: {path}", self._diff(base, change, path)))
        for path in layout.tests_added_other:
            out.append((f"added to the tests' directories: {path}", self._diff(base, change, path)))
        for path in layout.bytecode:
            out.append((f"compiled or binary file added: {path} (not judged: only source is)", ""))
        for line in layout.shadowing:
            out.append((f"new module {line}", ""))
        for path in layout.replaced_dirs:
            out.append((f"{path} replaces a directory of the base", ""))
        stems = {os.path.basename(p)[:-3] for p in layout.added_tests}
        base_stems = {os.path.basename(p)[:-3] for p in base if p.endswith(".py") and (p in bs.files)}
        for path in layout.added_tests:
            stem = os.path.basename(path)[:-3]
            if stem in base_stems:
                out.append((f"added test module {path} has the name of a test module of the base", ""))
        for path in layout.source_changed:
            if not path.endswith(".py") or path not in change:
                continue
            new = self._blob(change, path) or b""
            found = scan.added_findings(new, self._blob(base, path))
            text = new.decode("utf-8", "replace")
            for stem in stems:
                if re.search(rf"^\s*(from|import)\s+([\w.]*\.)?{re.escape(stem)}\b", text, re.MULTILINE):
                    found.append(f"imports the added test module {stem}")
            if found:
                out.append((f"source reads or steers the test harness: {path}", "\n".join(found[:MAX_SHOWN])))
        return out

    def _named(self, base: Session, after: Session) -> tuple[list[str], list[tuple[str, str]]]:
        blockers: list[str] = []
        escalations: list[tuple[str, str]] = []
        held = self._held_out_files()
        for name in self.named:
            path = name.split("::", 1)[0]
            at_base = [t for t in base.status if t == name or t.startswith(name + "::") or t.startswith(name + "[")]
            if not at_base and path in base.collect_errors:
                # the base has the test module, but it could not even be imported there: the
                # named tests must be collected and pass now
                at_base = [
                    t for t in after.status if t == name or t.startswith(name + "::") or t.startswith(name + "[")
                ]
                if not at_base:
                    blockers.append(f"test(s) the task names are not collected after the change: {name}")
                    continue
            if not at_base:
                if path in held:
                    continue
                escalations.append((f"the task names {name}, which the base does not have", ""))
                continue
            bad = [f"{t} ({after.status.get(t, 'not collected')})" for t in at_base if after.status.get(t) != PASSED]
            if bad:
                blockers.append("test(s) the task names do not pass: " + "; ".join(bad[:MAX_SHOWN]))
        return blockers, escalations

    def _added(self, layout: Layout, limit: float) -> tuple[str, list[str], list[tuple[str, str]]]:
        files = dict(layout.main)
        change = entries(self.repo, self.tree)
        for path in layout.added_tests:
            files[path] = change[path]
        outcome, _ = self._run(self._copy(files), self.opts.pytest_args(None, layout.added_tests), limit)
        if outcome.session is None:
            return "", [f"the added tests: {outcome.problem}"], []
        s = outcome.session
        failed = [
            f"{t} ({st}){_first_line(s.messages.get(t))}"
            for t, st in s.status.items()
            if st not in (PASSED, "skipped", "xfailed")
        ]
        failed += [f"{t}: could not be collected" for t in s.collect_errors]
        collected_files = {t.split("::", 1)[0] for t in s.status}
        empty = [p for p in layout.added_tests if p not in collected_files]
        escalations = [(f"added {p} is named like a test module but holds no test", "") for p in empty]
        blockers = [f"added tests fail: {'; '.join(failed[:MAX_SHOWN])}"] if failed else []
        self.added_excerpt = _excerpt(s, [t for t, st in s.status.items() if st != PASSED])
        passed = sum(1 for st in s.status.values() if st == PASSED)
        return f"; added tests: {passed} of {len(s.status)} passed", blockers, escalations

    def _held_out_files(self) -> dict[str, bytes]:
        root = self.opts.held_out
        if root is None:
            return {}
        found: dict[str, bytes] = {}
        total = 0
        for dirpath, dirnames, filenames in os.walk(root):
            dirnames[:] = sorted(d for d in dirnames if d != "__pycache__")
            for name in sorted(filenames):
                path = Path(dirpath) / name
                if path.is_symlink() or not path.is_file():
                    continue
                data = path.read_bytes()
                total += len(data)
                if total > 50_000_000:
                    raise ValidatorFault(f"the held-out directory {root} holds more than 50 MB")
                found[path.relative_to(root).as_posix()] = data
        return found

    def _held_out(self, layout: Layout, bs: Session, limit: float) -> tuple[str, list[str], dict[str, Any]]:
        files = self._held_out_files()
        rules = Rules({}, bs)
        tests = sorted(p for p in files if rules.test_module(p))
        if not tests:
            raise ValidatorFault(
                f"tooling.held_out {self.opts.held_out} holds no test module "
                f"(named like {', '.join(rules.python_files)})",
                hint=f"lay the held-out tests out like the repository, e.g. tests/test_hidden.py; see {DOCS}",
            )
        outcome, _ = self._run(self._copy(layout.main, files), self.opts.pytest_args(bs, tests), limit)
        if outcome.session is None:
            return (
                "; held-out: the run did not finish",
                ["held-out tests: the run did not finish"],
                {"held_out": {"problem": outcome.problem, "tail": outcome.tail}},
            )
        s = outcome.session
        passed = sum(1 for st in s.status.values() if st == PASSED)
        total = len(s.status) + len(s.collect_errors)
        private = {
            "held_out": {
                "status": dict(s.status),
                "messages": {t: m[:2000] for t, m in list(s.messages.items())[:50]},
                "collect_errors": dict(s.collect_errors),
            }
        }
        note = f"; held-out: {passed} of {total} passed"
        if passed != total or total == 0:
            return note, [f"held-out: {passed} of {total} passed"], private
        return note, [], private


@frozen
class _Finished:
    session: Session | None
    problem: str


def _relative(path: str, root: Path) -> str:
    rel = os.path.relpath(path, root).replace(os.sep, "/")
    return "" if rel == "." else rel


def _first_line(message: str | None) -> str:
    if not message:
        return ""
    lines = [line.strip() for line in message.splitlines() if line.strip()]
    return f": {lines[-1][:200]}" if lines else ""


def _excerpt(session: Session, tests: Sequence[str], limit: int = 4000) -> str:
    """What went wrong in ``tests`` (and any collection error), bounded: what a fix attempt is shown."""
    parts = [f"{t}:\n{m}" for t, m in session.collect_errors.items()]
    parts += [f"{t}:\n{session.messages[t]}" for t in tests if t in session.messages]
    text = "\n\n".join(parts)
    return text if len(text) <= limit else text[: limit - 40] + "\n[... cut]"


def _tally(session: Session) -> dict[str, int]:
    counts: dict[str, int] = {}
    for status in session.status.values():
        counts[status] = counts.get(status, 0) + 1
    return counts


_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f]")


def escape_control(text: str) -> str:
    """Control characters shown as ``\\xNN``: nothing an agent wrote moves a person's cursor."""
    return _CONTROL.sub(lambda m: f"\\x{ord(m.group()):02x}", text)


def show_diff(path: str, old: bytes | None, new: bytes | None) -> str:
    """A bounded unified diff of one file, control characters escaped."""
    if (old is not None and b"\0" in old) or (new is not None and b"\0" in new):
        return f"(binary file {path})"
    a = (old or b"").decode("utf-8", "replace").splitlines()
    b = (new or b"").decode("utf-8", "replace").splitlines()
    lines = list(
        difflib.unified_diff(
            a, b, "/dev/null" if old is None else f"a/{path}", "/dev/null" if new is None else f"b/{path}", lineterm=""
        )
    )
    if len(lines) > MAX_DIFF_LINES:
        lines = [*lines[:MAX_DIFF_LINES], f"[... {len(lines) - MAX_DIFF_LINES} more diff lines]"]
    return escape_control("\n".join(line[:400] for line in lines))


# ------------------------------------------------------------------ sharing


class _Shared:
    """Judgements of this process by everything they depend on, so validators of one phase
    that need test results share one run: the key holds the judged tree and base commit
    (immutable objects), the options, the interpreter environment's stamp and the held-out
    directory's content digest; an entry lives ten minutes."""

    TTL = 600.0

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._entries: OrderedDict[str, tuple[float, threading.Event, list[Any]]] = OrderedDict()

    def get(self, key: str, compute: Callable[[], Judgement]) -> Judgement:
        with self._lock:
            now = time.monotonic()
            for k in [k for k, (at, ev, _) in self._entries.items() if ev.is_set() and now - at > self.TTL]:
                del self._entries[k]
            found = self._entries.get(key)
            owner = found is None
            if found is None:
                found = (now, threading.Event(), [])
                self._entries[key] = found
                while len(self._entries) > 16:
                    self._entries.popitem(last=False)
        _, event, box = found
        if owner:
            try:
                box.append(compute())
            except BaseException as exc:
                box.append(exc)
                with self._lock:
                    self._entries.pop(key, None)
                raise
            finally:
                event.set()
        else:
            event.wait()
        value = box[0] if box else None
        if isinstance(value, BaseException):
            raise value
        assert isinstance(value, Judgement)
        return value


_SHARED = _Shared()


def judge_change(
    repo: Path,
    *,
    base: str,
    tree: str,
    project_root: Path,
    options: Options,
    spec: str,
    cache: Path | None,
) -> Judgement:
    """Judge ``tree`` against ``base`` (see the module docstring). Raises
    :class:`ValidatorFault` only when there is no verdict (the base cannot be judged)."""
    held = _held_digest(options.held_out)
    key = hashlib.sha256(
        json.dumps(
            [
                str(repo),
                base,
                tree,
                options.key(),
                str(options.python),
                str(options.pythonpath),
                str(options.execution_python),
                options.timeout,
                options.require_all,
                held,
                named_tests(spec),
                str(project_root),
            ],
            default=str,
        ).encode()
    ).hexdigest()

    def compute() -> Judgement:
        judge = Judge(repo, base=base, tree=tree, project_root=project_root, options=options, spec=spec, cache=cache)
        try:
            return judge.judge()
        finally:
            judge.close()

    return _SHARED.get(key, compute)


def _held_digest(root: Path | None) -> str:
    if root is None:
        return ""
    digest = hashlib.sha256()
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames.sort()
        for name in sorted(filenames):
            path = os.path.join(dirpath, name)
            with contextlib.suppress(OSError):
                st = os.stat(path)
                digest.update(f"{path}\0{st.st_size}\0{st.st_mtime_ns}\0".encode())
    return digest.hexdigest()


__all__ = ["Judgement", "Options", "judge_change", "named_tests", "options_from_command", "show_diff"]


def foreign_message(foreign: Mapping[str, str], where: Path) -> str:
    """Why a run that imported the project from elsewhere proves nothing, and the fix."""
    shown = "; ".join(f"{k} from {v}" for k, v in sorted(foreign.items())[:5])
    return (
        f"the tests imported the project's own code from outside {where}: {shown}. Their result says nothing "
        "about this work. Put the import roots on the path with tooling.pythonpath (e.g. [src]), do not add "
        f"other checkouts to sys.path in conftest.py, and check the interpreter's environment; see {DOCS}"
    )


def _verdict(
    summary: str,
    blockers: list[str],
    escalations: list[tuple[str, str]],
    *,
    empty: bool,
    details: dict[str, Any],
    private: dict[str, Any],
) -> Judgement:
    """Blockers block (a person's items named too); else escalations ask a person; else a run
    that collected nothing anywhere verifies nothing; else the tests pass."""
    if blockers:
        text = "tests judged " + summary + "\n" + "\n".join(f"- {b}" for b in blockers)
        if escalations:
            text += "\nalso for a person: " + "; ".join(w for w, _ in escalations[:MAX_SHOWN])
        return Judgement(severity="blocker", escalate=False, justification=text, details=details, private=private)
    if escalations:
        text = (
            "tests judged "
            + summary
            + "\nA person must look at what the change does to the tests or their harness "
            + "(the diff is in this result's details):\n"
            + "\n".join(f"- {w}" for w, _ in escalations[:MAX_SHOWN])
        )
        return Judgement(severity="warn", escalate=True, justification=text, details=details, private=private)
    if empty:
        return Judgement(
            severity="warn",
            escalate=False,
            justification="no tests collected, at the base or after the change; nothing was verified",
            details=details,
            private=private,
        )
    return Judgement(
        severity="pass", escalate=False, justification="tests judged " + summary, details=details, private=private
    )
