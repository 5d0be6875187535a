"""Which files of a change are harness, tests or source, and what each judged copy holds.

The base's own pytest session says where its tests live (the files it collected and the
conftests it loaded) and how it looks for them (``python_files``, the configuration file
names pytest's ``locate_config`` knows). From that:

- **harness**: everything that decides how tests are collected and run — every
  ``conftest.py``, every file named like a pytest configuration file, coverage's
  configuration, ``sitecustomize``/``usercustomize``, ``*.pth``, package metadata and entry
  points (``*.dist-info``/``*.egg-info``, ``setup.py``), and what selects the interpreter.
  Judged copies hold the base's version of each (or none, where the base had none).
- **test area**: the directories the base's tests live in (a ``tests/``-like directory and
  everything below it) and, for tests that live beside the source, the test modules
  themselves. Judged copies hold exactly the base's files there.
- **added test modules**: new files named like test modules; they run in a session of
  their own, never beside the base's tests.
- **bytecode**: compiled files (``.pyc``, extension modules) the base did not have; never
  in a judged copy.
- everything else is the change's source.
"""

from __future__ import annotations

import fnmatch
import posixpath
import sys
from collections.abc import Iterable, Mapping

from attrs import Factory, frozen

from .record import Session
from .tree import SYMLINK, Entry

#: pytest's own list when the base's session could not say (it always can from pytest 7).
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
        names = set(session.config_names or FALLBACK_CONFIG_NAMES) | set(FALLBACK_CONFIG_NAMES)
        self.config_names = frozenset(names)
        self.inifile = session.inifile
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
        parts = path.split("/")
        return (
            name in HARNESS_NAMES
            or name in self.config_names
            or path == self.inifile
            or name.endswith(".pth")
            or any(p.endswith((".dist-info", ".egg-info")) for p in parts[:-1])
        )

    def in_test_area(self, path: str) -> bool:
        return path in self.files or any(path.startswith(r + "/") for r in self.roots)

    def test_module(self, path: str) -> bool:
        name = posixpath.basename(path)
        return name.endswith(".py") and any(fnmatch.fnmatchcase(name, pat) for pat in self.python_files)


def split(
    rules: Rules,
    change: Mapping[str, Entry],
    *,
    import_roots: Iterable[str] = ("",),
    external: Iterable[str] = (),
) -> Layout:
    """Split ``change`` (the judged tree's files) against the base the rules came from."""
    base = rules.base
    harness_changed: list[str] = []
    tests_changed: list[str] = []
    added_other: list[str] = []
    added_tests: list[str] = []
    bytecode: list[str] = []
    source: list[str] = []
    main: dict[str, Entry] = {}
    for path in sorted(set(base) | set(change)):
        b, c = base.get(path), change.get(path)
        if rules.harness(path) or rules.in_test_area(path):
            if b is not None:
                main[path] = b
            if b == c:
                continue
            if rules.harness(path):
                harness_changed.append(path)
            elif b is not None:
                tests_changed.append(path)
            elif rules.test_module(path) and c is not None and c.mode != SYMLINK:
                added_tests.append(path)
            else:
                added_other.append(path)
            continue
        if c is None:
            if b is not None:
                source.append(path)
            continue
        if is_bytecode(path) and b != c:
            bytecode.append(path)
            if b is not None:
                main[path] = b
            continue
        if b is None and rules.test_module(path) and c.mode != SYMLINK:
            added_tests.append(path)
            continue
        main[path] = c
        if b != c:
            source.append(path)
    replaced = _drop_parents(main)
    shadowing = _shadowing(base, change, import_roots, external)
    return Layout(
        harness_changed=tuple(harness_changed),
        tests_changed=tuple(tests_changed),
        tests_added_other=tuple(added_other),
        added_tests=tuple(added_tests),
        bytecode=tuple(bytecode),
        shadowing=tuple(shadowing),
        replaced_dirs=tuple(replaced),
        main=main,
        source_changed=tuple(source),
    )


def _drop_parents(files: dict[str, Entry]) -> list[str]:
    """Entries that stand where another entry needs a directory (a file or link named
    ``tests`` beside ``tests/test_a.py``): dropped from the copy, named for a person."""
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
    """New top-level modules or packages, on an import root, named like a module the
    interpreter would otherwise load from elsewhere (the standard library, pytest, any
    installed package the base's tests used)."""
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
