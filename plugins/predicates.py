"""Built-in constraint predicates: ``files_in_scope``, ``tests_exist_for_modified``,
``no_secrets_in_diff`` (documented in ``docs/predicates.md``).

Each is cheap, deterministic and reads only. A misconfigured predicate (e.g. no
``allowed`` globs) fails rather than passes: a constraint that cannot be evaluated must
not wave the work through.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator, Mapping
from pathlib import PurePosixPath
from typing import Any

from snodo.api import PredicateContext, PredicateResult, PredicateSpec, hookimpl

from ._files import read_text, walk

#: (name, pattern) of everything ``no_secrets_in_diff`` looks for; docs/predicates.md lists them.
SECRET_PATTERNS: tuple[tuple[str, re.Pattern[str]], ...] = (
    ("AWS access key id", re.compile(r"\b(?:AKIA|ASIA|ABIA|ACCA)[0-9A-Z]{16}\b")),
    (
        "AWS secret access key",
        re.compile(r"""(?i)aws_?secret_?access_?key\W{0,4}[:=]\s*["']?[A-Za-z0-9/+=]{40}"""),
    ),
    ("private key block", re.compile(r"-----BEGIN (?:[A-Z0-9]+ )*PRIVATE KEY(?: BLOCK)?-----")),
    ("GitHub token", re.compile(r"\b(?:gh[pousr]_[A-Za-z0-9]{36,}|github_pat_[A-Za-z0-9_]{22,})")),
    ("Slack token", re.compile(r"\bxox[abposr]-[A-Za-z0-9-]{10,}")),
    (
        "Slack webhook URL",
        re.compile(r"https://hooks\.slack\.com/services/T[A-Za-z0-9]+/B[A-Za-z0-9]+/[A-Za-z0-9]+"),
    ),
    ("OpenAI-style API key", re.compile(r"\bsk-(?:[A-Za-z0-9]+-)*[A-Za-z0-9_]{20,}")),
    (
        "password assignment",
        re.compile(r"""(?i)\w*(?:password|passwd|pwd|secret)\w*["']?\s*[:=]\s*["'][^"'\s]{6,}["']"""),
    ),
)

_HUNK = re.compile(r"^@@ -\d+(?:,\d+)? \+(\d+)(?:,\d+)? @@")


def _glob(pattern: str) -> re.Pattern[str]:
    """A glob over POSIX paths: ``*`` and ``?`` stay in one component, ``**`` spans any."""
    pattern = pattern.strip().removeprefix("./")
    if pattern.endswith("/"):
        pattern += "**"
    out, i = "", 0
    while i < len(pattern):
        if pattern.startswith("**/", i):
            out, i = out + "(?:.*/)?", i + 3
        elif pattern.startswith("**", i):
            out, i = out + ".*", i + 2
        elif pattern[i] == "*":
            out, i = out + "[^/]*", i + 1
        elif pattern[i] == "?":
            out, i = out + "[^/]", i + 1
        else:
            out, i = out + re.escape(pattern[i]), i + 1
    return re.compile(out)


def _norm(path: str) -> str:
    return path.strip().removeprefix("./")


def files_in_scope(ctx: PredicateContext, params: Mapping[str, Any]) -> PredicateResult:
    allowed = params.get("allowed")
    if not isinstance(allowed, list | tuple) or not allowed or not all(isinstance(g, str) for g in allowed):
        return PredicateResult(ok=False, message="files_in_scope needs params.allowed: a non-empty list of globs")
    globs = [_glob(g) for g in allowed]
    outside = [p for p in map(_norm, ctx.changed_files) if not any(g.fullmatch(p) for g in globs)]
    if outside:
        return PredicateResult(
            ok=False,
            message=f"changed outside the allowed scope ({', '.join(allowed)}): {', '.join(outside)}",
        )
    return PredicateResult(ok=True, message=f"{len(ctx.changed_files)} changed file(s), all in scope")


def _is_test(path: PurePosixPath) -> bool:
    return path.name.startswith("test_") or path.stem.endswith("_test") or "tests" in path.parts[:-1]


_NO_TEST_NEEDED = frozenset({"__init__.py", "__main__.py", "conftest.py", "setup.py"})


def tests_exist_for_modified(ctx: PredicateContext, params: Mapping[str, Any]) -> PredicateResult:
    changed = [PurePosixPath(_norm(p)) for p in ctx.changed_files]
    modules = [
        p
        for p in changed
        if p.suffix == ".py"
        and p.name not in _NO_TEST_NEEDED
        and not _is_test(p)
        and (ctx.workspace / p).is_file()  # a deleted module needs no test
    ]
    if not modules:
        return PredicateResult(ok=True, message="no changed non-test Python modules")
    candidates = {PurePosixPath(p) for p in walk(ctx.workspace)} | set(changed)
    untested = []
    for module in modules:
        wanted = f"test_{module.name}"
        if not any(
            c.name == wanted and (c.parent == module.parent or {"tests", "test"} & set(c.parts[:-1]))
            for c in candidates
        ):
            untested.append(str(module))
    if untested:
        return PredicateResult(
            ok=False, message=f"no test_<module>.py under tests/ or beside it for: {', '.join(untested)}"
        )
    return PredicateResult(ok=True, message=f"each of {len(modules)} changed module(s) has a test file")


def _added_lines(diff: str) -> Iterator[tuple[str, int, str]]:
    """(file, line number in the new file, text) of every line the diff adds."""
    current, number = "?", 0
    for line in diff.splitlines():
        if line.startswith("+++ "):
            target = line[4:].strip().split("\t")[0]
            current = target[2:] if target.startswith("b/") else target
        elif hunk := _HUNK.match(line):
            number = int(hunk.group(1))
        elif line.startswith("+"):
            yield current, number, line[1:]
            number += 1
        elif not line.startswith("-") and not line.startswith("\\"):
            number += 1


def _file_lines(ctx: PredicateContext) -> Iterator[tuple[str, int, str]]:
    for rel in ctx.changed_files:
        text = read_text(ctx.workspace, rel, 5_000_000)
        for number, line in enumerate((text or "").splitlines(), start=1):
            yield rel, number, line


def no_secrets_in_diff(ctx: PredicateContext, params: Mapping[str, Any]) -> PredicateResult:
    lines = _added_lines(ctx.diff) if ctx.diff.strip() else _file_lines(ctx)
    findings = [
        f"{file}:{number}: matches the {name} pattern"
        for file, number, text in lines
        for name, pattern in SECRET_PATTERNS
        if pattern.search(text)
    ]
    if findings:
        shown = "; ".join(findings[:20]) + (f"; and {len(findings) - 20} more" if len(findings) > 20 else "")
        return PredicateResult(ok=False, message=f"possible secrets (values not shown): {shown}")
    return PredicateResult(ok=True, message="no known secret patterns in the change")


#: Each predicate's description and its check, by name: what this plugin registers and answers.
PREDICATES: dict[str, tuple[str, Callable[[PredicateContext, Mapping[str, Any]], PredicateResult]]] = {
    "files_in_scope": (
        "every changed file matches one of params.allowed (globs; ** spans directories)",
        files_in_scope,
    ),
    "tests_exist_for_modified": (
        "each changed non-test module x.py has a test_x.py under tests/ or beside it",
        tests_exist_for_modified,
    ),
    "no_secrets_in_diff": (
        "the change adds nothing matching a documented secret pattern (docs/predicates.md)",
        no_secrets_in_diff,
    ),
}


@hookimpl
def snodo_predicates() -> Iterator[PredicateSpec]:
    for name, (description, _check) in PREDICATES.items():
        # a secret found must leave no commit holding it
        yield PredicateSpec(name=name, description=description, discard_work_on_failure=name == "no_secrets_in_diff")


@hookimpl
def snodo_check_predicate(name: str, context: PredicateContext, params: Mapping[str, Any]) -> PredicateResult | None:
    found = PREDICATES.get(name)
    return found[1](context, params) if found else None
