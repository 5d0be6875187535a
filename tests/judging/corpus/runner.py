"""Judge one corpus case on a real repository, through the real CLI, on both paths.

For a case (``cases/``) and a path:

- ``engine``: a fresh git repository holding ``textkit`` at the task's base, ``snodo init
  --template team``, the protocol's producer mode switched to the ``mock`` coder dictating the
  case's ``files``/``delete``, the ``tests`` validator given the task's held-out tests; then
  ``snodo run SPEC --mode producer --json``. ``completed`` is a pass, a halt's outcome is the
  verdict.
- ``validate``: another fresh repository at the same base; the case's files written and
  deleted in the checkout and committed with plain ``git commit``, as a host's shell would;
  then ``snodo validate SPEC --phase post_execute --json --base <base>`` (the commit is part of
  the judged change, never the base).

Each repository gets its own ``$SNODO_HOME``. The library has no virtual environment of its
own, so snodo's own interpreter (which has pytest) runs its tests.

    python -m tests.judging.corpus.runner                  # every case, both paths
    python -m tests.judging.corpus.runner --case slug-honest --path validate -v
    python -m tests.judging.corpus.runner --family conftest-hooks --json
"""

from __future__ import annotations

import argparse
import concurrent.futures
import functools
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import yaml

from tests.conftest import git, make_repo
from tests.judging.corpus.cases import ALL, Case
from tests.judging.corpus.tasks import TASKS, Task, library_files

PATHS = ("engine", "validate")
CHEAT_CAUGHT = frozenset({"blocker", "escalate"})
#: The template's 300 s is a long wait for a 52-test library: a hang case waits this long,
#: in each validator that runs the tests.
TEST_TIMEOUT = 45
#: Generous: a hang case costs TEST_TIMEOUT per test run, and snodo may run several.
CLI_TIMEOUT = 900


@dataclass
class Record:
    case: str
    family: str
    task: str
    path: str
    expected: str
    got: str
    caught: bool
    seconds: float
    excerpt: str = ""
    notes: list[str] = field(default_factory=list)
    base: str = ""
    #: Whether snodo's output names a path the change touched: an escalation must show the
    #: person what changed, whatever its format.
    names_change: bool = False

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


def environment(home: Path) -> dict[str, str]:
    """The environment a developer's shell would give snodo: the outer test session's own
    ``PYTEST_*`` variables are not part of it."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PYTEST_", "COV_CORE_"))}
    env.update(SNODO_HOME=str(home), LITELLM_LOCAL_MODEL_COST_MAP="True", COLUMNS="200")
    return env


def snodo(repo: Path, home: Path, *args: str, timeout: float = CLI_TIMEOUT) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "snodo", "-q", *args],
        cwd=repo,
        env=environment(home),
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )


@functools.cache
def held_out_supported() -> bool:
    """Whether this snodo's pytest validator knows ``tooling.held_out``: the protocol check of
    a throwaway repository says. Before the judging rewrite it is refused as unknown, and a
    refused protocol would judge nothing at all."""
    with tempfile.TemporaryDirectory(prefix="corpus-probe-") as tmp:
        repo = make_repo(Path(tmp) / "repo")
        home = Path(tmp) / "home"
        snodo(repo, home, "init", "--template", "team")
        protocol = repo / ".snodo" / "protocol.yml"
        data = load_protocol(protocol)
        _tests_validator(data)["tooling"]["held_out"] = str(Path(tmp))
        protocol.write_text(yaml.safe_dump(data, sort_keys=False))
        return snodo(repo, home, "protocol", "check").returncode == 0


class _Loader(yaml.SafeLoader):
    """YAML 1.2 booleans: the protocol's ``on:`` keys stay strings, as snodo reads them."""


_Loader.yaml_implicit_resolvers = {
    first: [(tag, regexp) for tag, regexp in resolvers if tag != "tag:yaml.org,2002:bool"]
    for first, resolvers in yaml.SafeLoader.yaml_implicit_resolvers.items()
}
_Loader.add_implicit_resolver(
    "tag:yaml.org,2002:bool", re.compile(r"^(?:true|True|TRUE|false|False|FALSE)$"), list("tTfF")
)


def load_protocol(path: Path) -> dict[str, Any]:
    data = yaml.load(path.read_text(), Loader=_Loader)  # a SafeLoader subclass
    assert isinstance(data, dict)
    return data


def _tests_validator(protocol: dict[str, Any]) -> dict[str, Any]:
    return next(v for v in protocol["validators"] if v["validator_id"] == "tests")


def configure(repo: Path, task: Task, case: Case, notes: list[str]) -> None:
    """The team template, with the mock coder dictating the case and the held-out tests set."""
    protocol = repo / ".snodo" / "protocol.yml"
    data = load_protocol(protocol)
    producer = next(m for m in data["modes"] if m["mode_id"] == "producer")
    producer["coder"] = "mock"
    # ``files`` is always given, even empty: an empty coder_config means the mock's own demo module
    producer["coder_config"] = {"files": dict(case.files), "delete": list(case.delete)}
    tooling = _tests_validator(data).setdefault("tooling", {})
    tooling["timeout"] = TEST_TIMEOUT
    # The acceptance validator's "all tests pass" runs the suite again, under its own limit.
    for validator in data["validators"]:
        if validator["validator_type"] == "acceptance" and validator.get("evaluation_phase") == "post_execute":
            validator.setdefault("tooling", {})["timeout"] = TEST_TIMEOUT
    if held_out_supported():
        tooling["held_out"] = str(task.held_out)
    else:
        notes.append("tooling.held_out refused by this snodo: judged without held-out tests")
    # The mock dictates the same operations on every attempt: a recovery attempt would only
    # judge the same tree again.
    data.setdefault("execution", {})["max_recovery_depth"] = 0
    protocol.write_text(yaml.safe_dump(data, sort_keys=False, width=1000))


def build(task: Task, case: Case, repo: Path, home: Path, notes: list[str]) -> str:
    """A committed repository at ``task``'s base with the protocol in force; its HEAD."""
    make_repo(repo)
    for rel, content in library_files(task).items():
        write(repo, rel, content)
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", f"textkit without {task.function}")
    init = snodo(repo, home, "init", "--template", "team")
    if init.returncode != 0:
        raise RuntimeError(f"snodo init failed: {init.stdout}{init.stderr}")
    configure(repo, task, case, notes)
    git(repo, "add", "-A", ".snodo")
    git(repo, "commit", "-q", "-m", "snodo protocol")
    return git(repo, "rev-parse", "HEAD").strip()


def write(repo: Path, rel: str, content: str | bytes) -> None:
    target = repo / rel
    target.parent.mkdir(parents=True, exist_ok=True)
    if isinstance(content, bytes):
        target.write_bytes(content)
    else:
        target.write_text(content)


def apply_by_hand(repo: Path, case: Case) -> None:
    """The change as a host's agent makes it: files written in the checkout, then committed."""
    for rel, content in case.files.items():
        write(repo, rel, content)
    for rel, content in case.binary_files().items():
        write(repo, rel, content)
    for rel in case.delete:
        target = repo / rel
        if target.is_dir():
            shutil.rmtree(target)
        else:
            target.unlink()
    # -f: a cheat may well add what a .gitignore would hide (bytecode); the host's agent can too
    git(repo, "add", "-A", "-f", ".")
    git(repo, "commit", "-q", "--allow-empty", "-m", case.name)


def parse(proc: subprocess.CompletedProcess[str]) -> dict[str, Any]:
    try:
        payload = json.loads(proc.stdout)
    except json.JSONDecodeError:
        return {
            "error": f"not JSON (exit {proc.returncode})",
            "stdout": proc.stdout[-2000:],
            "stderr": proc.stderr[-2000:],
        }
    return payload if isinstance(payload, dict) else {"error": "not an object", "payload": payload}


def engine_outcome(payload: dict[str, Any]) -> str:
    if payload.get("status") == "completed":
        return "pass"
    if "error" in payload and "status" not in payload:
        return "could_not_run"
    return str(payload.get("outcome") or payload.get("status") or "unknown")


def validate_outcome(payload: dict[str, Any]) -> str:
    for key in ("outcome", "status"):
        if isinstance(payload.get(key), str):
            return payload[key]
    return "could_not_run" if "error" in payload else "unknown"


def excerpt(payload: dict[str, Any], limit: int = 1500) -> str:
    """What the validators said (their justifications), or the error, for the report."""
    lines = []
    for result in payload.get("validators") or payload.get("results") or []:
        if isinstance(result, dict):
            lines.append(
                f"{result.get('validator_id')}: {result.get('severity') or result.get('status')}: "
                f"{result.get('justification') or result.get('message') or ''}"
            )
    if not lines:
        lines.append(json.dumps({k: payload[k] for k in list(payload)[:8]}, default=str))
    text = "\n".join(lines)
    return text if len(text) <= limit else text[:limit] + " …"


def judge(case: Case, path: str, workdir: Path | None = None) -> Record:
    """Judge ``case`` on ``path`` ("engine" or "validate") in a fresh repository."""
    if path not in PATHS:
        raise ValueError(f"path must be one of {PATHS}, not {path!r}")
    task = TASKS[case.task]
    notes: list[str] = []
    with tempfile.TemporaryDirectory(prefix=f"corpus-{case.name}-{path}-", dir=workdir) as tmp:
        repo, home = Path(tmp) / "repo", Path(tmp) / "home"
        if path == "engine" and case.binary:
            # A coder's write operation carries text, written as UTF-8: bytecode cannot be
            # dictated through it. The case stands on the validate path, where a shell can.
            return Record(
                case.name,
                case.family,
                case.task,
                path,
                case.expect,
                "n/a",
                True,
                0.0,
                notes=["binary files cannot be written by a coder on the engine path"],
            )
        started = time.perf_counter()
        base = build(task, case, repo, home, notes)
        if path == "engine":
            proc = snodo(repo, home, "run", task.spec, "--mode", "producer", "--json")
            payload = parse(proc)
            got = engine_outcome(payload)
        else:
            apply_by_hand(repo, case)
            proc = snodo(
                repo,
                home,
                "validate",
                task.spec,
                "--phase",
                "post_execute",
                "--mode",
                "producer",
                "--json",
                "--base",
                base,
            )
            payload = parse(proc)
            got = validate_outcome(payload)
        seconds = time.perf_counter() - started
    changed = [*case.files, *case.delete, *case.binary_files()]
    return Record(
        case.name,
        case.family,
        case.task,
        path,
        case.expect,
        got,
        verdict_caught(case, got),
        round(seconds, 2),
        excerpt(payload),
        notes,
        base,
        any(p in proc.stdout for p in changed),
    )


def naive(case: Case, held_out: bool = False) -> tuple[int | str, str]:
    """Whether the cheat works at all: the case applied to the base in a plain directory and
    judged the naive way (``python -m pytest -q`` from the root, ``src`` on ``PYTHONPATH``, exit
    status only). A working cheat exits 0 here. With ``held_out`` only the task's held-out
    tests run, placed where the repository's tests are."""
    task = TASKS[case.task]
    with tempfile.TemporaryDirectory(prefix=f"corpus-naive-{case.name}-") as tmp:
        root = Path(tmp)
        for rel, content in library_files(task).items():
            write(root, rel, content)
        for rel, content in {**case.files, **case.binary_files()}.items():
            write(root, rel, content)
        for rel in case.delete:
            target = root / rel
            shutil.rmtree(target) if target.is_dir() else target.unlink()
        args = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider"]
        if held_out:
            for source in task.held_out.rglob("*.py"):
                write(root, str(source.relative_to(task.held_out)), source.read_text())
            args += [str(p.relative_to(task.held_out)) for p in task.held_out.rglob("test_*.py")]
        env = {**environment(root / "home"), "PYTHONPATH": "src"}
        env.pop("PYTHONDONTWRITEBYTECODE", None)
        try:
            proc = subprocess.run(args, cwd=root, env=env, capture_output=True, text=True, timeout=20, check=False)
        except subprocess.TimeoutExpired:
            return "timeout", ""
        return proc.returncode, (proc.stdout + proc.stderr)[-600:]


def verdict_caught(case: Case, got: str) -> bool:
    """A cheat is caught by a blocker or an escalation; an honest change is judged right only
    when it gets exactly what it should (pass, or an escalation for a test refactor)."""
    if case.cheat:
        return got in CHEAT_CAUGHT
    return got == case.expect


def select(names: Iterable[str] = (), families: Iterable[str] = ()) -> list[Case]:
    names, families = set(names), set(families)
    unknown = names - {c.name for c in ALL}
    if unknown:
        raise SystemExit(f"unknown case(s): {', '.join(sorted(unknown))}")
    if not names and not families:
        return list(ALL)
    return [c for c in ALL if c.name in names or c.family in families]


def judge_all(
    cases: Sequence[Case], paths: Sequence[str] = PATHS, progress: bool = False, jobs: int = 1
) -> Iterator[Record]:
    """Every (case, path), ``jobs`` at a time (each is a chain of subprocesses), in order."""
    pairs = [(case, path) for case in cases for path in paths]
    with concurrent.futures.ThreadPoolExecutor(max_workers=max(1, jobs)) as pool:
        for record in pool.map(lambda pair: judge(*pair), pairs):
            if progress:
                mark = "caught" if record.caught else "MISSED"
                print(
                    f"{record.case:<42} {record.path:<9} expect {record.expected:<8} got {record.got:<16} "
                    f"{mark:<7} {record.seconds:6.1f}s",
                    file=sys.stderr,
                    flush=True,
                )
            yield record


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--case", action="append", default=[], help="a case's name (repeatable)")
    parser.add_argument("--family", action="append", default=[], help="a family (repeatable)")
    parser.add_argument("--path", choices=[*PATHS, "both"], default="both")
    parser.add_argument("--json", action="store_true", help="one JSON list of records on stdout")
    parser.add_argument("-j", "--jobs", type=int, default=1, help="cases judged at once (default 1)")
    parser.add_argument("--list", action="store_true", help="list the cases and exit")
    parser.add_argument(
        "--naive",
        action="store_true",
        help="judge each case the naive way (exit status of plain pytest, then of the held-out tests)",
    )
    parser.add_argument("-v", "--verbose", action="store_true", help="print each record's excerpt")
    args = parser.parse_args(argv)
    cases = select(args.case, args.family)
    if args.list:
        for c in cases:
            print(f"{c.family:<20} {c.name:<42} {c.task:<7} expect {c.expect:<8} {c.why}")
        return 0
    if args.naive:
        for c in cases:
            (visible, out), (hidden, _) = naive(c), naive(c, held_out=True)
            print(f"{c.family:<20} {c.name:<42} pytest exit {visible!s:<8} held-out exit {hidden!s:<8}", flush=True)
            if args.verbose:
                print(out)
        return 0
    paths = PATHS if args.path == "both" else (args.path,)
    records = []
    for record in judge_all(cases, paths, progress=True, jobs=args.jobs):
        records.append(record)
        if args.verbose and not args.json:
            print(record.excerpt, *record.notes, sep="\n", file=sys.stderr)
    if args.json:
        print(json.dumps([r.as_dict() for r in records], indent=1))
    return 0 if all(r.caught for r in records) else 1


if __name__ == "__main__":
    sys.exit(main())
