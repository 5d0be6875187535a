"""``forbidden-imports``: a snodo validator that blocks changed Python files importing banned modules.

Configure it in the protocol::

    validators:
      - validator_id: no-subprocess
        validator_type: forbidden-imports
        evaluation_phase: post_execute
        tooling:
          forbidden: [subprocess, os.system, pickle]

A changed ``.py`` file that imports a listed module (``import subprocess``, ``from
subprocess import run``, ``import subprocess.foo``), or a listed name from a module
(``from os import system`` for ``os.system``), is a blocker naming file and line. Before the
work (``pre_execute``) nothing has changed yet, so it passes. It fails closed: a missing
``forbidden`` list, a workspace that is not there or a changed file that does not parse
raises, and the runner reports an error rather than a pass.

Imports nothing from snodo but :mod:`snodo.api`, like every plugin should.
"""

from __future__ import annotations

import ast
import os
from collections.abc import Iterator
from pathlib import Path

from snodo.api import ValidationRequest, ValidatorFault, ValidatorSpec, Verdict, hookimpl

NAME = "forbidden-imports"
SETTINGS = ("forbidden",)


@hookimpl
def snodo_validators() -> Iterator[ValidatorSpec]:
    yield ValidatorSpec(
        name=NAME,
        description="blocks changed Python files that import a module listed in tooling.forbidden",
        needs_model=False,
        deterministic=True,
        settings=SETTINGS,
    )


def _forbidden(request: ValidationRequest) -> tuple[str, ...]:
    tooling = request.validator.tooling
    vid = request.validator.validator_id
    unknown = sorted(str(k) for k in tooling if k not in (*SETTINGS, "timeout"))
    if unknown:
        raise ValidatorFault(
            f"validator {vid!r}: unknown tooling key(s) {', '.join(unknown)}",
            hint=f"the {NAME} validator honours: forbidden, timeout",
        )
    names = tooling.get("forbidden")
    if not isinstance(names, list) or not names or not all(isinstance(n, str) and n.strip() for n in names):
        raise ValidatorFault(
            f"validator {vid!r}: tooling.forbidden must be a non-empty list of module names",
            hint="e.g. forbidden: [subprocess, pickle]",
        )
    return tuple(n.strip() for n in names)


def imported_names(tree: ast.AST) -> Iterator[tuple[int, str]]:
    """(line, dotted name) of every absolute import: modules, and module.name for ``from`` imports."""
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                yield node.lineno, alias.name
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            yield node.lineno, node.module
            for alias in node.names:
                yield node.lineno, f"{node.module}.{alias.name}"


def _banned(name: str, forbidden: tuple[str, ...]) -> str | None:
    for ban in forbidden:
        if name == ban or name.startswith(ban + "."):
            return ban
    return None


def _source(root: Path, rel: str) -> str | None:
    """The text of a changed file; None when it was deleted. Never reads outside the project."""
    target = Path(os.path.realpath(root / rel))
    if root not in target.parents:
        raise ValidatorFault(f"changed file {rel!r} is outside the project; refusing to judge it")
    try:
        return target.read_text(encoding="utf-8")
    except FileNotFoundError:
        return None
    except (OSError, UnicodeDecodeError) as exc:
        raise ValidatorFault(f"cannot read changed file {rel!r}: {exc}") from None


@hookimpl
def snodo_validate(name: str, request: ValidationRequest) -> Verdict | None:
    if name != NAME:
        return None
    forbidden = _forbidden(request)
    root = Path(os.path.realpath(request.workspace))
    if not root.is_dir():
        raise ValidatorFault(f"the workspace {request.workspace} is not a directory; nothing can be checked")
    changed = [f for f in request.changed_files if f.endswith(".py")]
    if not changed:
        return Verdict(severity="pass", justification=f"no changed Python file to check ({request.phase})")
    findings: list[str] = []
    checked = 0
    for rel in changed:
        text = _source(root, rel)
        if text is None:
            continue
        try:
            tree = ast.parse(text, filename=rel)
        except SyntaxError as exc:
            raise ValidatorFault(
                f"changed file {rel!r} does not parse (line {exc.lineno}); its imports cannot be checked"
            ) from None
        checked += 1
        for line, module in imported_names(tree):
            ban = _banned(module, forbidden)
            if ban:
                findings.append(f"{rel}:{line} imports {module} (forbidden: {ban})")
    if findings:
        return Verdict(
            severity="blocker",
            justification="; ".join(sorted(set(findings))),
            details={"findings": sorted(set(findings)), "forbidden": list(forbidden)},
        )
    return Verdict(
        severity="pass",
        justification=f"{checked} changed Python file(s) import none of: {', '.join(forbidden)}",
        details={"checked": checked, "forbidden": list(forbidden)},
    )
