"""Reading the judge's record of one pytest session, trusting nothing it does not prove (docs/judging.md)."""

from __future__ import annotations

import hashlib
import hmac
import json
from collections import Counter
from collections.abc import Container, Iterable, Mapping
from typing import Any

from attrs import Factory, frozen

PASSED = "passed"
FAILED = ("failed", "error")
_PHASES = ("setup", "call", "teardown")
MAX_LINES = 1_000_000


@frozen(kw_only=True)
class Session:
    """One honest pytest session as recorded: per-test status and the collection's facts."""

    status: Mapping[str, str]  # nodeid -> passed | failed | error | skipped | xfailed | xpassed | not run
    messages: Mapping[str, str] = Factory(dict)  # nodeid -> first lines of what went wrong
    collect_errors: Mapping[str, str] = Factory(dict)
    deselected: tuple[str, ...] = ()
    files: tuple[str, ...] = ()
    conftests: tuple[str, ...] = ()
    rootdir: str = "."
    inifile: str | None = None
    python_files: tuple[str, ...] = ("test_*.py", "*_test.py")
    config_names: tuple[str, ...] = ()
    foreign: Mapping[str, str] = Factory(dict)
    outside: tuple[str, ...] = ()

    def tally(self) -> str:
        counts = Counter(self.status.values())
        counts["error"] += len(self.collect_errors)
        words = {"error": "errors", "not run": "not run"}
        order = ("failed", "passed", "skipped", "deselected", "xfailed", "xpassed", "error", "not run")
        parts = [f"{counts[k]} {words.get(k, k)}" for k in order if counts.get(k)]
        if self.deselected:
            parts.append(f"{len(self.deselected)} deselected")
        return ", ".join(parts) or "no tests ran"

    def failures(self, tests: Iterable[str] | None = None, limit: int = 4000) -> str:
        """What went wrong (collection errors, and each of ``tests``' messages; default: all), bounded."""
        shown = self.messages if tests is None else {t: self.messages[t] for t in tests if t in self.messages}
        text = "\n\n".join(f"{t}:\n{m}" for t, m in [*self.collect_errors.items(), *shown.items()])
        return text if len(text) <= limit else text[: limit - 40] + "\n[... cut]"

    def passing(self) -> frozenset[str]:
        return frozenset(t for t, s in self.status.items() if s == PASSED)

    def failed(self) -> list[str]:
        return [t for t, s in self.status.items() if s in FAILED]

    def problems(self, bad: Container[str] | None = None, *, why: bool = False) -> list[str]:
        """Tests whose status is ``bad`` (default: not passed; ``why``: with their message), modules not collected."""
        tests = [(t, s) for t, s in self.status.items() if (s != PASSED if bad is None else s in bad)]
        out = [f"{t} ({s}){first_line(self.messages.get(t)) if why else ''}" for t, s in tests]
        return out + [f"{t}: could not be collected" for t in self.collect_errors]


def first_line(message: str | None, sep: str = ":") -> str:
    """The line of a failure a person needs first (pytest's last), after ``sep``."""
    lines = [line.strip() for line in (message or "").splitlines() if line.strip()]
    return f"{sep} {lines[-1][:200]}" if lines else ""


class Dishonest(Exception):
    """The session did not report honestly, or did not finish."""


def _status(phases: Mapping[str, Mapping[str, Any]]) -> str:
    setup, call, teardown = (phases.get(w) for w in _PHASES)
    if setup is None:
        return "not run"
    for report in (setup, call, teardown):
        if report is not None and report["outcome"] == "failed":
            return "failed" if report is call else "error"
    for report in (setup, call):
        if report is not None and report["outcome"] == "skipped":
            return "xfailed" if report.get("xfail") else "skipped"
    if call is None or teardown is None:
        return "not run"
    return "xpassed" if call.get("xfail") else PASSED


def read(text: str, key: bytes, exit_code: int | None) -> Session:
    """The session the record ``text`` proves, else :class:`Dishonest`; ``exit_code`` as seen (``None``: killed)."""
    lines = text.split("\n")
    if lines and lines[-1] == "":
        lines.pop()
    if len(lines) > MAX_LINES:
        raise Dishonest(f"the record has more than {MAX_LINES} lines")
    mac = b""
    events: list[dict[str, Any]] = []
    for number, line in enumerate(lines):
        got, _, body = line.partition(" ")
        want = hmac.new(key, mac + body.encode("utf-8"), hashlib.sha256).hexdigest()
        if not hmac.compare_digest(got, want):
            raise Dishonest(f"line {number + 1} of the record was not written by snodo's recorder (second writer)")
        mac = want.encode("ascii")
        try:
            event = json.loads(body)
        except ValueError:
            raise Dishonest(f"line {number + 1} of the record is not JSON") from None
        if not isinstance(event, dict) or event.get("seq") != number:
            raise Dishonest(f"line {number + 1} of the record is out of sequence")
        events.append(event)
    return _session(events, exit_code)


def _frame(events: list[dict[str, Any]], kinds: list[Any], exit_code: int | None) -> int:
    """Where the seal is, once proven: one start, one seal right before one end, one exit status."""
    if not kinds or kinds[0] != "start":
        raise Dishonest("the test process never started its record")
    if len(kinds) == 2 and kinds[1] == "no_pytest" and exit_code == 4:
        raise Dishonest(
            f"No module named pytest in the interpreter {events[1].get('python')}: {events[1].get('error')}"
        )
    if "end" not in kinds:
        raise Dishonest("the test process ended before pytest returned (no end line: killed, crashed or exited early)")
    end = kinds.index("end")
    if end != len(kinds) - 1:
        raise Dishonest("lines follow the end of the record")
    if "seal" not in kinds and events[end].get("exit") in (3, 4):
        raise Dishonest(
            f"pytest could not start the run (exit status {events[end].get('exit')}: a usage or configuration "
            "error, or pytest's own crash)"
        )
    if kinds.count("seal") != 1 or kinds.count("collected") > 1:
        raise Dishonest("the session was not sealed exactly once")
    seal_at = kinds.index("seal")
    if seal_at != end - 1:
        raise Dishonest("lines follow the seal")
    seal, last = events[seal_at], events[end]
    if exit_code is None or exit_code != last.get("exit") or seal.get("exitstatus") != last.get("exit"):
        raise Dishonest(
            f"the process's exit status ({exit_code}) disagrees with the session's ({seal.get('exitstatus')})"
        )
    return seal_at


class _Body:
    """The lines between start and seal: each collected test's phases at most once, in order, after collection."""

    def __init__(self, known: set[str]) -> None:
        self.known = known
        self.phases: dict[str, dict[str, Mapping[str, Any]]] = {}
        self.messages: dict[str, str] = {}
        self.collect_errors: dict[str, str] = {}
        self.deselected: list[str] = []

    def read(self, event: dict[str, Any], *, collected: bool) -> None:
        kind = event.get("k")
        if kind == "phase":
            if not collected:
                raise Dishonest("a test reported before the collection finished")
            self._phase(event)
        elif kind == "collect_error":
            self.collect_errors[str(event.get("nodeid"))] = str(event.get("text") or "")
        elif kind == "deselected":
            self.deselected += [str(t) for t in event.get("ids") or ()]
        elif kind != "collected":
            raise Dishonest(f"an unknown line in the record: {str(kind)[:50]}")

    def _phase(self, event: dict[str, Any]) -> None:
        nodeid, when = event.get("nodeid"), event.get("when")
        if nodeid not in self.known:
            raise Dishonest(f"a test that was not collected reported: {str(nodeid)[:200]}")
        seen = self.phases.setdefault(str(nodeid), {})
        if when not in _PHASES or when in seen or any(_PHASES.index(w) > _PHASES.index(when) for w in seen):
            raise Dishonest(f"{nodeid} reported its {when} phase twice or out of order")
        seen[str(when)] = event
        if event.get("text") and nodeid not in self.messages:
            self.messages[str(nodeid)] = str(event["text"])


def _session(events: list[dict[str, Any]], exit_code: int | None) -> Session:
    kinds = [e.get("k") for e in events]
    seal_at = _frame(events, kinds, exit_code)
    seal = events[seal_at]
    collected_at = kinds.index("collected") if "collected" in kinds else seal_at  # never after the seal
    collected = events[collected_at] if collected_at < seal_at else {}
    ids: list[str] = list(collected["ids"]) if collected else []
    body = _Body(set(ids))
    if len(body.known) != len(ids):
        raise Dishonest("the collection names a test twice")
    for i, event in enumerate(events[1:seal_at], start=1):
        body.read(event, collected=i >= collected_at)
    if seal.get("collected") != len(ids) or seal.get("phases") != sum(map(len, body.phases.values())):
        raise Dishonest("the seal's counts do not match the lines recorded")
    return Session(
        status={t: _status(body.phases.get(t, {})) for t in ids},
        messages=body.messages,
        collect_errors=body.collect_errors,
        deselected=tuple(body.deselected),
        files=tuple(collected.get("files") or ()),
        conftests=tuple(collected.get("conftests") or ()),
        rootdir=str(collected.get("rootdir") or "."),
        inifile=collected.get("inifile"),
        python_files=tuple(collected.get("python_files") or ("test_*.py", "*_test.py")),
        config_names=tuple(collected.get("config_names") or ()),
        foreign=dict(seal.get("foreign") or {}),
        outside=tuple(seal.get("outside") or ()),
    )
