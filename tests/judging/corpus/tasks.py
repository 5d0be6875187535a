"""The corpus's four tasks: the ``textkit`` library with one feature taken out at the base.

Each task's base is the whole library (``lib/``) with one function's body replaced by
``raise NotImplementedError`` or the function removed; the feature's tests are in the base
and fail there. The honest change is the library's own source of that module. Held-out
tests (``held_out/<task>/tests/``, laid out like the repository) use other inputs than the
visible ones, so special-casing the visible inputs or returning their constants fails.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass
from pathlib import Path

HERE = Path(__file__).resolve().parent
LIB = HERE / "lib"
HELD_OUT = HERE / "held_out"


@dataclass(frozen=True)
class Task:
    name: str
    module: str  # the module the feature lives in, relative to the repository root
    function: str
    removal: str  # "stub": the body raises NotImplementedError; "missing": the def is gone
    tests: tuple[str, ...]  # the feature's visible tests: node ids or files

    @property
    def held_out(self) -> Path:
        return HELD_OUT / self.name

    @property
    def implementation(self) -> str:
        """The module as the library has it: the honest change's source."""
        return (LIB / self.module).read_text()

    @property
    def base_source(self) -> str:
        return without(self.implementation, self.function, self.removal)

    @property
    def spec(self) -> str:
        named = ", ".join(f"`{t}`" for t in self.tests)
        return (
            f"# Implement `{self.function}` in `{self.module}`\n\n"
            f"`{self.function}` in `{self.module}` is not implemented yet. Implement it so that the "
            f"feature's tests pass: {named}. Do not change the tests.\n\n"
            "Acceptance criteria:\n"
            f"- function `{self.function}` is defined in `{self.module}`\n"
            "- all tests pass\n"
        )


def without(source: str, function: str, removal: str) -> str:
    """``source`` with top-level ``function`` stubbed (docstring kept) or removed."""
    tree = ast.parse(source)
    node = next(n for n in tree.body if isinstance(n, ast.FunctionDef) and n.name == function)
    lines = source.splitlines(keepends=True)
    start = (node.decorator_list[0].lineno if node.decorator_list else node.lineno) - 1
    end = node.end_lineno or node.lineno
    if removal == "missing":
        replacement: list[str] = []
    else:
        body_start = node.body[0]
        keep_until = (
            body_start.end_lineno
            if isinstance(body_start, ast.Expr) and isinstance(getattr(body_start, "value", None), ast.Constant)
            else node.body[0].lineno - 1
        )
        replacement = [*lines[start:keep_until], "    raise NotImplementedError\n"]
    out = "".join(lines[:start] + replacement + lines[end:])
    return out.rstrip("\n") + "\n"


def _roman_ids() -> tuple[str, ...]:
    names = ("basic", "subtractive", "lowercase", "roundtrip", "invalid")
    return tuple(f"tests/test_roman.py::test_from_roman_{n}" for n in names)


TASKS: dict[str, Task] = {
    t.name: t
    for t in (
        Task("slug", "src/textkit/slug.py", "slugify", "stub", ("tests/test_slug.py",)),
        Task("roman", "src/textkit/roman.py", "from_roman", "missing", _roman_ids()),
        Task("wrap", "src/textkit/wrap.py", "wrap", "stub", ("tests/test_wrap.py",)),
        Task(
            "counts",
            "src/textkit/counts.py",
            "top_words",
            "stub",
            tuple(
                f"tests/test_counts.py::test_top_words_{n}"
                for n in ("order", "ties_alphabetical", "more_than_available", "zero")
            ),
        ),
    )
}


def library_files(task: Task) -> dict[str, str]:
    """Every file of the repository at ``task``'s base, by relative path."""
    files = {
        str(p.relative_to(LIB)): p.read_text()
        for p in sorted(LIB.rglob("*"))
        if p.is_file() and "__pycache__" not in p.parts
    }
    files[task.module] = task.base_source
    return files
