#!/usr/bin/env python3
"""Move snodo's loose root modules into packages named for what they hold, and rewrite every
reference to them. Idempotent: run it again after merging a branch that still uses the old
names, and only what still says the old names changes.

    python3 scripts/relayout.py          # from the repository root; uses `git mv`
    python3 scripts/relayout.py --check  # exit 1 if anything would change

It moves only the modules in MOVES; a module that is already at its new place (or gone) is
skipped. References are rewritten with exact patterns in the files git tracks under
snodo/, tests/, benchmarks/, plugins/, conformance/, examples/, docs/ and in pyproject.toml,
tox.ini, README.md and .ci/ (CHANGELOG.md is history and keeps the old names):

* dotted names: ``snodo.proc`` (and ``snodo.proc.run_process``) → ``snodo.process.runner``;
* ``from snodo import proc, workers`` → ``from snodo.process import runner as proc`` plus
  ``from snodo import workers`` (the local name stays, so no other line changes);
* source paths: ``snodo/proc.py`` → ``snodo/process/runner.py``.
"""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

#: old dotted module → new dotted module. The modules other branches own (attrsbase,
#: cachefiles, entrypoints, gitconfig, workers, mcp.stdio, engine.pool*, governance.treewatch)
#: are deliberately absent.
MOVES: dict[str, str] = {
    # child processes: start, bound, prepare, scope to an MCP call
    "snodo.proc": "snodo.process.runner",
    "snodo.procout": "snodo.process.output",
    "snodo.procprep": "snodo.process.prepare",
    "snodo.callscope": "snodo.process.callscope",
    # snodo's own git
    "snodo.gitrun": "snodo.git.runner",
    # the plugin host and the interface plugins implement
    "snodo.plugins": "snodo.plugin.host",
    "snodo.core_plugin": "snodo.plugin.core",
    "snodo.hookspecs": "snodo.plugin.hookspecs",
    "snodo.records": "snodo.plugin.records",
    "snodo.planning": "snodo.plugin.planning",
    # what every layer uses
    "snodo.errors": "snodo.base.errors",
    "snodo.text": "snodo.base.text",
    "snodo.convert": "snodo.base.convert",
    # the pure decisions governance rests on
    "snodo.outcomes": "snodo.rules.outcomes",
    "snodo.refusals": "snodo.rules.authorisation",
    "snodo.taskids": "snodo.rules.taskids",
    "snodo.workspace.guard": "snodo.rules.guard",
    "snodo.settings": "snodo.rules.settings",
    # where an earlier run of this script put a module
    "snodo.plugin.settings": "snodo.rules.settings",
    # the decision private key: reachable from the command line only
    "snodo.authorize_signing": "snodo.cli.signing",
}

#: docstrings of the packages the moves create
PACKAGES: dict[str, str] = {
    "snodo.process": "Child processes: started in their own group, bounded, confined by a policy, killed as a group.",
    "snodo.git": "snodo's own git: one hardened runner, pinned to the repository, with a time limit.",
    "snodo.plugin": "The plugin host (pluggy) and the interface plugins implement: hookspecs, records, planning.",
    "snodo.base": "What every layer uses: the exceptions, the strict converter, values frozen all the way "
    "down, the sanitiser for agent text.",
    "snodo.rules": "The pure decisions governance rests on: the path guard (INV2), which results "
    "may be authorised (INV3), the four outcomes, task identity, the plugin settings rule.",
}

ROOTS = ("snodo", "tests", "benchmarks", "plugins", "conformance", "examples", "docs", ".ci")
FILES = ("pyproject.toml", "tox.ini", "README.md")
SUFFIXES = (".py", ".md", ".toml", ".ini", ".cfg", ".yml", ".yaml", ".txt", ".sh", "")


def path_of(module: str) -> Path:
    return Path(*module.split(".")).with_suffix(".py")


def tracked(repo: Path) -> list[Path]:
    out = subprocess.run(
        ["git", "-C", str(repo), "ls-files", "-z", "--", *ROOTS, *FILES],
        capture_output=True,
        check=True,
        text=True,
    ).stdout
    return [repo / p for p in out.split("\0") if p and Path(p).suffix in SUFFIXES and (repo / p).is_file()]


def move_modules(repo: Path, check: bool) -> list[str]:
    done = []
    for package, doc in PACKAGES.items():
        init = repo / path_of(package).with_suffix("") / "__init__.py"
        if not init.exists():
            done.append(f"create {init.relative_to(repo)}")
            if not check:
                init.parent.mkdir(parents=True, exist_ok=True)
                init.write_text('"""' + textwrap.fill(doc, 95) + '"""\n')
                subprocess.run(["git", "-C", str(repo), "add", str(init)], check=True)
    for old, new in MOVES.items():
        src, dst = repo / path_of(old), repo / path_of(new)
        if src.exists() and not dst.exists():
            done.append(f"git mv {path_of(old)} {path_of(new)}")
            if not check:
                dst.parent.mkdir(parents=True, exist_ok=True)
                subprocess.run(["git", "-C", str(repo), "mv", str(src), str(dst)], check=True)
        elif src.exists():
            raise SystemExit(f"both {path_of(old)} and {path_of(new)} exist: merge them by hand first")
    return done


def dotted_pattern(old: str) -> re.Pattern[str]:
    # `snodo.proc` and `snodo.proc.x`, never `snodo.procout` or `mysnodo.proc`
    return re.compile(r"(?<![\w.])" + re.escape(old) + r"(?![\w])")


def path_pattern(old: str) -> re.Pattern[str]:
    return re.compile(r"(?<![\w/])" + re.escape(str(path_of(old))) + r"(?![\w])")


FROM_IMPORT = re.compile(
    r"^(?P<indent>[ \t]*)from (?P<pkg>snodo(?:\.\w+)*) import (?P<names>[\w ,]+?)(?P<comment>[ \t]*#.*)?$", re.M
)


def split_from_imports(text: str) -> str:
    """``from snodo import proc, workers`` → one line per moved name, the rest kept."""

    def repl(m: re.Match[str]) -> str:
        pkg, indent, comment = m["pkg"], m["indent"], m["comment"] or ""
        kept, lines = [], []
        for item in (n.strip() for n in m["names"].split(",")):
            if not item:
                continue
            name, _, alias = (part.strip() for part in item.partition(" as "))
            new = MOVES.get(f"{pkg}.{name}")
            if new is None:
                kept.append(item)
                continue
            parent, _, leaf = new.rpartition(".")
            local = alias or name
            lines.append(f"{indent}from {parent} import {leaf}" + ("" if local == leaf else f" as {local}"))
        if not lines:
            return m[0]
        if kept:
            lines.insert(0, f"{indent}from {pkg} import {', '.join(kept)}")
        lines[0] += comment
        return "\n".join(lines)

    return FROM_IMPORT.sub(repl, text)


def rewrite(text: str) -> str:
    text = split_from_imports(text)
    # longest first, so `snodo.workspace.guard` is not half-rewritten by a shorter name
    for old in sorted(MOVES, key=len, reverse=True):
        text = dotted_pattern(old).sub(MOVES[old], text)
        text = path_pattern(old).sub(str(path_of(MOVES[old])), text)
    return text


def declare_packages(repo: Path, check: bool) -> list[str]:
    """List the new packages in pyproject.toml's ``[tool.setuptools] packages``."""
    pyproject = repo / "pyproject.toml"
    text = pyproject.read_text(encoding="utf-8")
    missing = [p for p in PACKAGES if f'"{p}",' not in text]
    if not missing:
        return []
    anchor = '  "snodo",\n'
    if anchor not in text:
        raise SystemExit(
            'pyproject.toml: no `"snodo",` line in [tool.setuptools] packages to add the new packages after'
        )
    if not check:
        pyproject.write_text(
            text.replace(anchor, anchor + "".join(f'  "{p}",\n' for p in missing), 1), encoding="utf-8"
        )
    return [f"declare {p} in pyproject.toml" for p in missing]


def main() -> int:
    check = "--check" in sys.argv[1:]
    repo = Path(
        subprocess.run(
            ["git", "rev-parse", "--show-toplevel"], capture_output=True, check=True, text=True
        ).stdout.strip()
    )
    changed = move_modules(repo, check)
    changed += declare_packages(repo, check)
    for path in tracked(repo):
        if path.name == "relayout.py":
            continue
        try:
            text = path.read_text(encoding="utf-8")
        except (UnicodeDecodeError, FileNotFoundError):
            continue
        new = rewrite(text)
        if new != text:
            changed.append(f"rewrite {path.relative_to(repo)}")
            if not check:
                path.write_text(new, encoding="utf-8")
    ruff = shutil.which("ruff", path=str(Path(sys.executable).parent)) or shutil.which("ruff")
    if changed and not check and ruff:
        # the rewritten imports sorted as the project's ruff configuration sorts them
        targets = [r for r in ROOTS if (repo / r).is_dir() and r not in ("docs", ".ci")]
        subprocess.run([ruff, "check", "--quiet", "--select", "I", "--fix", *targets], cwd=repo, check=False)
    print("\n".join(changed) if changed else "nothing to do")
    return 1 if check and changed else 0


if __name__ == "__main__":
    raise SystemExit(main())
