"""Which files of a change are harness, tests or source, what each judged copy holds, what a person must see."""

from __future__ import annotations

import difflib
import fnmatch
import os
import posixpath
import re
import sys
from collections import defaultdict
from collections.abc import Iterable, Mapping
from pathlib import Path

from attrs import Factory, frozen

from . import scan
from .record import Session
from .tree import SYMLINK, Blobs, Entry

#: pytest's own list, with what the base's session says.
FALLBACK_CONFIG_NAMES = (
    "pytest.ini",
    ".pytest.ini",
    "pytest.toml",
    ".pytest.toml",
    "pyproject.toml",
    "tox.ini",
    "setup.cfg",
)
HARNESS_NAMES = frozenset(
    {
        "conftest.py",
        "sitecustomize.py",
        "usercustomize.py",
        "setup.py",
        ".coveragerc",
        ".python-version",
        "pyvenv.cfg",
        "uv.toml",
        "poetry.toml",
        "pdm.toml",
        ".pdm-python",
        "entry_points.txt",
    }
)
BYTECODE_SUFFIXES = (".pyc", ".pyo", ".so", ".pyd", ".dylib", ".dll")
MAX_DIFF_LINES = 120
MAX_SHOWN = 20
_TEST_DIR_NAMES = frozenset({"test", "tests", "testing", "test_suite", "testsuite"})


def _test_like_dir(name: str) -> bool:
    lower = name.lower()
    return lower in _TEST_DIR_NAMES or lower.startswith("test_") or lower.endswith(("_tests", "_test"))


def is_bytecode(path: str) -> bool:
    return path.endswith(BYTECODE_SUFFIXES) or "__pycache__" in path.split("/")


@frozen(kw_only=True)
class Layout:
    """How one change splits, and the copies it is judged in."""

    harness_changed: tuple[str, ...] = ()
    tests_changed: tuple[str, ...] = ()  # modified, deleted or renamed base test-area files
    tests_added_other: tuple[str, ...] = ()  # new files in the test area that are not test modules
    added_tests: tuple[str, ...] = ()  # new files named like test modules
    bytecode: tuple[str, ...] = ()
    shadowing: tuple[str, ...] = ()  # "path: why"
    replaced_dirs: tuple[str, ...] = ()
    main: Mapping[str, Entry] = Factory(dict)  # the base's tests with the change's source
    source_changed: tuple[str, ...] = ()  # non-test, non-harness files the change touched


class Rules:
    """The base's answers: what is harness, where the tests live."""

    def __init__(self, base: Mapping[str, Entry], session: Session) -> None:
        self.session = session
        self.config_names = frozenset(session.config_names) | frozenset(FALLBACK_CONFIG_NAMES)
        self.python_files = tuple(session.python_files) or ("test_*.py", "*_test.py")
        self.roots: set[str] = set()
        self.files: set[str] = set()
        for f in (*session.files, *session.conftests):
            if f.startswith("../") or f.startswith("/"):
                continue
            parent = posixpath.dirname(f)
            top = ""
            while parent and _test_like_dir(posixpath.basename(parent)):
                top = parent
                parent = posixpath.dirname(parent)
            if top:
                self.roots.add(top)
            else:
                self.files.add(f)
        self.base = base

    def harness(self, path: str) -> bool:
        name = posixpath.basename(path)
        return (
            name in HARNESS_NAMES
            or name in self.config_names
            or path == self.session.inifile
            or name.endswith(".pth")
            or any(p.endswith((".dist-info", ".egg-info")) for p in path.split("/")[:-1])
        )

    def in_test_area(self, path: str) -> bool:
        return path in self.files or any(path.startswith(r + "/") for r in self.roots)

    def test_module(self, path: str) -> bool:
        name = posixpath.basename(path)
        return name.endswith(".py") and any(fnmatch.fnmatchcase(name, pat) for pat in self.python_files)


def split(rules: Rules, change: Mapping[str, Entry], *, import_roots: Iterable[str], external: Iterable[str]) -> Layout:
    """Split ``change`` (the judged tree's files) against the base the rules came from."""
    base = rules.base
    kinds: dict[str, list[str]] = defaultdict(list)
    main: dict[str, Entry] = {}
    for path in sorted(set(base) | set(change)):
        kind, held = _place(rules, path, base.get(path), change.get(path))
        if kind:
            kinds[kind].append(path)
        if held is not None:
            main[path] = held
    replaced = _drop_parents(main)
    return Layout(
        harness_changed=tuple(kinds["harness"]),
        tests_changed=tuple(kinds["test"]),
        tests_added_other=tuple(kinds["added other"]),
        added_tests=tuple(kinds["added test"]),
        bytecode=tuple(kinds["bytecode"]),
        shadowing=tuple(_shadowing(base, change, import_roots, external)),
        replaced_dirs=tuple(replaced),
        main=main,
        source_changed=tuple(kinds["source"]),
    )


def _place(rules: Rules, path: str, b: Entry | None, c: Entry | None) -> tuple[str, Entry | None]:
    """What ``path`` (``b`` at the base, ``c`` after) is in the change ("": unchanged), and what the copy holds."""
    if rules.harness(path) or rules.in_test_area(path):
        return _place_guarded(rules, path, b, c)
    if c is None:
        return "source", None
    if is_bytecode(path) and b != c:
        return "bytecode", b
    if b is None and _new_test(rules, path, c):
        return "added test", None
    return "source" if b != c else "", c


def _place_guarded(rules: Rules, path: str, b: Entry | None, c: Entry | None) -> tuple[str, Entry | None]:
    if b == c:
        return "", b
    if rules.harness(path):
        return "harness", b
    if b is not None:
        return "test", b
    return "added test" if _new_test(rules, path, c) else "added other", None


def _new_test(rules: Rules, path: str, c: Entry | None) -> bool:
    return c is not None and c.mode != SYMLINK and rules.test_module(path)


def _drop_parents(files: dict[str, Entry]) -> list[str]:
    """Entries where another needs a directory (``tests`` beside ``tests/test_a.py``): dropped, shown to a person."""
    dirs = {posixpath.dirname(p) for p in files}
    parents: set[str] = set()
    for found in dirs:
        d = found
        while d:
            parents.add(d)
            d = posixpath.dirname(d)
    clashing = sorted(p for p in files if p in parents)
    for p in clashing:
        del files[p]
    return clashing


def _shadowing(
    base: Mapping[str, Entry], change: Mapping[str, Entry], import_roots: Iterable[str], external: Iterable[str]
) -> list[str]:
    """New top-level modules on an import root named like one loaded from elsewhere (stdlib, pytest, the base's)."""
    taken = frozenset(sys.stdlib_module_names) | frozenset(external) | {"pytest", "_pytest", "pluggy", "py"}
    found: list[str] = []

    def top(path: str, root: str) -> str | None:
        rel = path[len(root) + 1 :] if root else path
        if root and not path.startswith(root + "/"):
            return None
        first = rel.split("/", 1)[0]
        name = first[:-3] if first.endswith(".py") and "/" not in rel else first
        if "/" in rel and not first.isidentifier():
            return None
        return name if name.isidentifier() else None

    for root in dict.fromkeys(import_roots):
        had = {top(p, root) for p in base}
        for path in sorted(set(change) - set(base)):
            name = top(path, root)
            if name and name not in had and name in taken:
                found.append(f"{path}: shadows the module {name!r} the interpreter would load from elsewhere")
                had.add(name)
    return found


def escalations(
    layout: Layout, base: Mapping[str, Entry], change: Mapping[str, Entry], blobs: Blobs, base_tests: Iterable[str]
) -> list[tuple[str, str]]:
    """What a person must see of the change: ``(what, diff or the lines found)``."""

    def diff(path: str) -> str:
        return show_diff(path, _blob(blobs, base, path), _blob(blobs, change, path))

    out = [(f"test harness changed: {p}", diff(p)) for p in layout.harness_changed]
    out += [(f"test {'changed' if p in change else 'deleted'}: {p}", diff(p)) for p in layout.tests_changed]
    out += [(f"added to the tests' directories: {p}", diff(p)) for p in layout.tests_added_other]
    out += [(f"compiled or binary file added: {p} (not judged: only source is)", "") for p in layout.bytecode]
    out += [(f"new module {line}", "") for line in layout.shadowing]
    out += [(f"{p} replaces a directory of the base", "") for p in layout.replaced_dirs]
    out += [
        (f"added test module {p} has the name of a test module of the base", "")
        for p in _homonyms(layout, base, base_tests)
    ]
    return out + _steering(layout, base, change, blobs)


def _homonyms(layout: Layout, base: Mapping[str, Entry], base_tests: Iterable[str]) -> list[str]:
    taken = {_stem(p) for p in set(base_tests) & set(base) if p.endswith(".py")}
    return [p for p in layout.added_tests if _stem(p) in taken]


def _steering(
    layout: Layout, base: Mapping[str, Entry], change: Mapping[str, Entry], blobs: Blobs
) -> list[tuple[str, str]]:
    """Changed source that reads or steers the harness, or imports an added test module."""
    out = []
    added = {_stem(p) for p in layout.added_tests}
    for path in layout.source_changed:
        new = _blob(blobs, change, path)
        if not path.endswith(".py") or new is None:
            continue
        found = scan.added_findings(new, _blob(blobs, base, path))
        text = new.decode("utf-8", "replace")
        for name in added:
            if re.search(rf"^\s*(from|import)\s+([\w.]*\.)?{re.escape(name)}\b", text, re.MULTILINE):
                found.append(f"imports the added test module {name}")
        if found:
            out.append((f"source reads or steers the test harness: {path}", "\n".join(found[:MAX_SHOWN])))
    return out


def _blob(blobs: Blobs, files: Mapping[str, Entry], path: str) -> bytes | None:
    return blobs[files[path].sha] if path in files else None


def _stem(path: str) -> str:
    return posixpath.basename(path)[:-3]


def rewritten(copy: Path, files: Mapping[str, Entry], rules: Rules, blobs: Blobs) -> list[str]:
    """Test-area and harness files of ``copy`` changed, removed or new after a run (a new conftest steers)."""
    guarded = [p for p, e in files.items() if e.mode != SYMLINK and (rules.harness(p) or rules.in_test_area(p))]
    changed = [p for p in guarded if _read(copy / p) != blobs[files[p].sha]]
    return sorted(changed + [p for p in _new_files(copy, files) if _guarded_new(rules, p)])


def _guarded_new(rules: Rules, path: str) -> bool:
    return rules.harness(path) or (rules.in_test_area(path) and rules.test_module(path))


def _read(path: Path) -> bytes | None:
    try:
        return None if path.is_symlink() else path.read_bytes()
    except OSError:
        return None


def _new_files(copy: Path, files: Mapping[str, Entry]) -> list[str]:
    found = []
    for dirpath, dirnames, filenames in os.walk(copy):
        dirnames[:] = [d for d in dirnames if d not in ("__pycache__", ".pytest_cache")]
        rels = (Path(dirpath, name).relative_to(copy).as_posix() for name in filenames)
        found += [rel for rel in rels if rel not in files and not rel.endswith((".pyc", ".pyo"))]
    return found


_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f]")


def show_diff(path: str, old: bytes | None, new: bytes | None) -> str:
    """A bounded unified diff of one file, control characters as ``\\xNN`` (nothing an agent wrote moves a cursor)."""
    before, after = old or b"", new or b""
    if b"\0" in before + after:
        return f"(binary file {path})"
    a, b = before.decode("utf-8", "replace").splitlines(), after.decode("utf-8", "replace").splitlines()
    names = ("/dev/null" if old is None else f"a/{path}", "/dev/null" if new is None else f"b/{path}")
    lines = list(difflib.unified_diff(a, b, *names, lineterm=""))
    if len(lines) > MAX_DIFF_LINES:
        lines = [*lines[:MAX_DIFF_LINES], f"[... {len(lines) - MAX_DIFF_LINES} more diff lines]"]
    return _CONTROL.sub(lambda m: f"\\x{ord(m.group()):02x}", "\n".join(line[:400] for line in lines))
