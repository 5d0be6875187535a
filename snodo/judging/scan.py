"""Source that reads or steers the test harness (pytest's machinery, a test run's variables, the stack, how
the process ends, ``builtins``), found by parsing it: only lines the change added count, and a parse failure."""

from __future__ import annotations

import ast
import re

_HARNESS_MODULES = frozenset({"pytest", "_pytest", "pluggy"})
_PROCESS_CALLS = {
    ("os", "_exit"): "ends the process without reporting",
    ("os", "kill"): "signals a process",
    ("os", "abort"): "aborts the process",
    ("atexit", "register"): "runs code at exit",
    ("signal", "signal"): "installs a signal handler",
    ("sys", "settrace"): "traces the running code",
    ("sys", "setprofile"): "profiles the running code",
    ("sys", "_getframe"): "inspects the caller's stack",
    ("inspect", "stack"): "inspects the caller's stack",
    ("inspect", "currentframe"): "inspects the caller's stack",
    ("gc", "get_objects"): "searches every live object",
    ("gc", "get_referrers"): "searches every live object",
    ("faulthandler", "enable"): "changes how the process reports a crash",
}
_WATCHED_VARIABLE = re.compile(r"^(PYTEST_|CI$|CONTINUOUS_INTEGRATION$|GITHUB_ACTIONS$|SNODO)")
_WATCHED_ASSIGN = {("sys", "exit"), ("sys", "excepthook"), ("sys", "modules"), ("sys", "meta_path"), ("os", "_exit")}


def _dotted(node: ast.AST) -> tuple[str, ...]:
    parts: list[str] = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if isinstance(node, ast.Name):
        parts.append(node.id)
        return tuple(reversed(parts))
    return ()


def _text(node: ast.AST) -> str | None:
    return node.value if isinstance(node, ast.Constant) and isinstance(node.value, str) else None


def _harness(module: str | None) -> bool:
    return module is not None and module.split(".")[0] in _HARNESS_MODULES


def _watched(variable: str | None) -> bool:
    return variable is not None and _WATCHED_VARIABLE.match(variable) is not None


class _Finder(ast.NodeVisitor):
    def __init__(self) -> None:
        self.found: list[tuple[int, str]] = []

    def add(self, node: ast.AST, why: str) -> None:
        self.found.append((getattr(node, "lineno", 0), why))

    def visit_Import(self, node: ast.Import) -> None:
        for alias in node.names:
            if alias.name.split(".")[0] in _HARNESS_MODULES:
                self.add(node, f"imports {alias.name}")
            if alias.name in ("builtins", "__builtin__"):
                self.add(node, "imports builtins")
        self.generic_visit(node)

    def visit_ImportFrom(self, node: ast.ImportFrom) -> None:
        module = node.module or ""
        if module.split(".")[0] in _HARNESS_MODULES:
            self.add(node, f"imports from {module}")
        if module == "builtins":
            self.add(node, "imports from builtins")
        if module in ("os", "sys", "atexit", "signal") and any(
            a.name in ("_exit", "exit", "register", "signal", "_getframe") for a in node.names
        ):
            self.add(node, f"imports a process-ending or stack-reading function from {module}")
        self.generic_visit(node)

    def visit_Call(self, node: ast.Call) -> None:
        name = _dotted(node.func)
        first = _text(node.args[0]) if node.args else None
        if name[-2:] in _PROCESS_CALLS:
            self.add(node, f"{'.'.join(name)}() {_PROCESS_CALLS[name[-2:]]}")  # type: ignore[index]
        if name[-1:] in (("__import__",), ("import_module",)):
            if any(_harness(_text(a)) for a in node.args):
                self.add(node, "imports the test harness dynamically")
            elif node.args and not isinstance(node.args[0], ast.Constant):
                self.add(node, "imports a module whose name is computed at run time")
        if name[-1:] in (("getenv",), ("get",)) and _watched(first):
            self.add(node, f"reads the variable {first}")
        self.generic_visit(node)

    def visit_Subscript(self, node: ast.Subscript) -> None:
        key, target = _text(node.slice), _dotted(node.value)
        if target[-1:] == ("environ",) and _watched(key):
            self.add(node, f"reads the variable {key}")
        if target[-1:] == ("modules",) and _harness(key):
            self.add(node, f"looks for {key} in sys.modules")
        self.generic_visit(node)

    def visit_Compare(self, node: ast.Compare) -> None:
        value = _text(node.left)
        for op, right in zip(node.ops, node.comparators, strict=False):
            where = _dotted(right) if isinstance(op, ast.In | ast.NotIn) else ()
            if where[-1:] == ("modules",) and _harness(value):
                self.add(node, f"looks for {value} in sys.modules")
            if where[-1:] == ("environ",) and _watched(value):
                self.add(node, f"looks for the variable {value}")
        self.generic_visit(node)

    def visit_Assign(self, node: ast.Assign | ast.AugAssign) -> None:
        for target in node.targets if isinstance(node, ast.Assign) else [node.target]:
            name = _dotted(target)
            if name[-2:] in _WATCHED_ASSIGN or (name and name[0] in ("builtins", "__builtins__")):
                self.add(node, f"replaces {'.'.join(name)}")
        self.generic_visit(node)

    visit_AugAssign = visit_Assign

    def visit_Name(self, node: ast.Name) -> None:
        if node.id == "__builtins__":
            self.add(node, "reaches __builtins__")

    def visit_Attribute(self, node: ast.Attribute) -> None:
        if node.attr in ("f_back", "f_globals", "f_locals", "gi_frame", "tb_frame"):
            self.add(node, f"reads frames ({node.attr})")
        if node.attr == "modules" and _dotted(node.value) == ("sys",):
            self.add(node, "reaches sys.modules")
        self.generic_visit(node)


def findings(source: bytes) -> list[tuple[int, str]]:
    """``(line, why)`` for each construct in ``source`` that reads or steers the harness."""
    try:
        tree = ast.parse(source)
    except (SyntaxError, ValueError):
        return [(0, "does not parse as Python here")]
    finder = _Finder()
    finder.visit(tree)
    return sorted(set(finder.found))


def added_findings(new: bytes, old: bytes | None) -> list[str]:
    """The findings of ``new`` whose line ``old`` did not hold, as ``"line N: why: the line"``."""
    new_lines = new.decode("utf-8", "replace").splitlines()
    before: set[tuple[str, str]] = set()
    if old is not None:
        old_lines = old.decode("utf-8", "replace").splitlines()
        before = {(why, _line(old_lines, n)) for n, why in findings(old)}
    out = []
    for n, why in findings(new):
        text = _line(new_lines, n)
        if (why, text) not in before:
            out.append(f"line {n}: {why}: {text[:160]}" if n else why)
    return out


def _line(lines: list[str], number: int) -> str:
    return lines[number - 1].strip() if 0 < number <= len(lines) else ""
