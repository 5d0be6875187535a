"""Which Python runs the project's tests when no setting names one, found once, from files
only (nothing is executed), in the order docs/protocol.md gives; an environment the project's
files point at must lie inside it.
"""

from __future__ import annotations

import base64
import functools
import hashlib
import os
import re
import sys
from pathlib import Path
from typing import Any

from attrs import frozen

STARTUP_VIRTUAL_ENV = os.environ.get("VIRTUAL_ENV")
STARTUP_UV_ENV = os.environ.get("UV_PROJECT_ENVIRONMENT")
SNODO_OWN = "snodo's own interpreter"


@frozen(kw_only=True)
class ProjectPython:
    path: str
    source: str

    def describe(self) -> str:
        return f"{self.path} ({self.source})"


def _venv_python(env: Path) -> Path | None:
    if not (env.is_dir() and (env / "pyvenv.cfg").is_file()):
        return None
    for rel in ("bin/python", "bin/python3", "Scripts/python.exe"):
        candidate = env / rel
        if candidate.is_file() and os.access(candidate, os.X_OK):
            return candidate
    return None


def _inside(path: Path, root: Path) -> bool:
    return Path(os.path.realpath(path)).is_relative_to(root)


def _contained(root: Path, rel: str) -> Path | None:
    """``rel`` (from a project file) as a path that stays inside ``root``, else ``None``."""
    if not rel or "\x00" in rel:
        return None
    target = Path(os.path.normpath(root / os.path.expanduser(rel) if not os.path.isabs(rel) else rel))
    return target if _inside(target, root) else None


def read_toml(path: Path) -> dict[str, Any]:
    if not path.is_file():
        return {}
    import tomllib  # noqa: PLC0415 a project without pyproject.toml never pays for it

    try:
        with open(path, "rb") as fh:
            return tomllib.load(fh)
    except (OSError, tomllib.TOMLDecodeError, UnicodeDecodeError):
        return {}


def dig(doc: Any, *keys: str) -> Any:
    for key in keys:
        if not isinstance(doc, dict):
            return None
        doc = doc.get(key)
    return doc


def _declared(root: Path) -> list[tuple[Path, str]]:
    """Environments uv, Poetry, Hatch and PDM declare, in that order."""
    found: list[tuple[Path, str]] = []
    pyproject = read_toml(root / "pyproject.toml")
    if STARTUP_UV_ENV and ((root / "uv.lock").is_file() or dig(pyproject, "tool", "uv") is not None):
        # Set by the person who started snodo, not by the project: it may point anywhere.
        env = Path(STARTUP_UV_ENV)
        found.append((env if env.is_absolute() else root / env, "uv (UV_PROJECT_ENVIRONMENT)"))
    if dig(pyproject, "tool", "poetry") is not None:
        found.extend(_poetry(root, pyproject))
    for doc, keys in (
        (read_toml(root / "hatch.toml"), ("envs", "default", "path")),
        (pyproject, ("tool", "hatch", "envs", "default", "path")),
    ):
        rel = dig(doc, *keys)
        if isinstance(rel, str) and (target := _contained(root, rel)) is not None:
            found.append((target, "Hatch (envs.default.path)"))
    return found + _pdm(root)


def _pdm(root: Path) -> list[tuple[Path, str]]:
    """``.pdm-python`` names the interpreter (a symlink out of the environment): the environment
    two levels up must lie inside the project."""
    pdm = root / ".pdm-python"
    if not pdm.is_file() or pdm.is_symlink():
        return []
    try:
        text = pdm.read_text(encoding="utf-8").strip()
    except (OSError, UnicodeDecodeError):
        return []
    declared = _contained(root, str(Path(os.path.normpath(root / text)).parent.parent)) if text else None
    return [(declared, "PDM (.pdm-python)")] if declared is not None else []


def _poetry(root: Path, pyproject: dict[str, Any]) -> list[tuple[Path, str]]:
    """Poetry's environment for this project, from its files only (never ``poetry env info``)."""
    local = dig(read_toml(root / "poetry.toml"), "virtualenvs")
    if isinstance(local, dict) and local.get("in-project") is True:
        return [(root / ".venv", "Poetry (virtualenvs.in-project)")]
    name = dig(pyproject, "tool", "poetry", "name") or dig(pyproject, "project", "name")
    if not isinstance(name, str) or not name:
        return []
    # Poetry names its cached environments <name>-<hash of the project path>-py<version>.
    sanitized = re.sub(r'[ $`!*@"\\\r\n\t]', "_", name.lower())[:42]
    digest = base64.urlsafe_b64encode(hashlib.sha256(str(root).encode()).digest()).decode()[:8]
    cache = Path(os.environ.get("POETRY_CACHE_DIR") or Path.home() / ".cache" / "pypoetry") / "virtualenvs"
    try:
        matches = sorted(cache.glob(f"{sanitized}-{digest}-py*"))
    except OSError:
        return []
    return [(m, "Poetry (its cache directory)") for m in reversed(matches)]


def discover(project_root: Path) -> ProjectPython:
    root = Path(os.path.realpath(project_root))
    candidates: list[tuple[Path, str]] = []
    if STARTUP_VIRTUAL_ENV:
        candidates.append((Path(STARTUP_VIRTUAL_ENV), "$VIRTUAL_ENV"))
    candidates += [(root / ".venv", ".venv/"), (root / "venv", "venv/")]
    candidates += _declared(root)
    for env, source in candidates:
        own_config = source not in ("uv (UV_PROJECT_ENVIRONMENT)", "Poetry (its cache directory)")
        if own_config and not _inside(env, root):
            continue  # a symlink (or $VIRTUAL_ENV) leading out of the project is not the project's
        python = _venv_python(env)
        if python is not None:
            return ProjectPython(path=str(python), source=source)
    return ProjectPython(path=sys.executable, source=SNODO_OWN)


_discovered = functools.cache(discover)


def project_python(project_root: Path, setting: str | None = None) -> ProjectPython:
    """``setting`` (``execution.python``) when given, else the discovered one, looked up once per root."""
    if setting is not None:
        return ProjectPython(path=setting, source="execution.python")
    return _discovered(Path(os.path.realpath(project_root)))
