"""``snodo plugin new coder|validator NAME``: a ready plugin package that passes the kit, from
``plugin_template/`` (docs/plugins.md). Nothing generated names a path of this machine (a team
commits these files): snodo is required from the package index, or ``SNODO_SOURCE`` for tox."""

from __future__ import annotations

import base64
import hashlib
import json
import re
import zipfile
from importlib import metadata, resources
from pathlib import Path
from typing import Any
from urllib.parse import unquote, urlparse

import click

import snodo
from snodo import DISTRIBUTION
from snodo.base.errors import SnodoError
from snodo.cli.common import dir_option, json_option
from snodo.cli.output import emit_json

#: The requirement a plugin puts on snodo: the plugin API it is generated against.
SNODO_PIN = f"{DISTRIBUTION}>=0.3"

NAME_RE = re.compile(r"^[a-z][a-z0-9]*(-[a-z0-9]+)*$")


def names(kind: str, name: str) -> tuple[str, str, str]:
    """``(distribution, plugin name, module)``; for my-check: ``snodo-my-check``, ``my-check``, ``snodo_my_check``."""
    if not NAME_RE.match(name) or len(name) > 50:
        raise SnodoError(
            f"{name!r} is not a usable {kind} name",
            hint="use lowercase letters, digits and single dashes, starting with a letter (e.g. my-check)",
        )
    plugin = name.removeprefix("snodo-") or name
    dist = f"snodo-{plugin}"
    return dist, plugin, dist.replace("-", "_")


def snodo_source(package_dir: Path) -> str | None:
    """Where the running snodo can be installed from again (``SNODO_SOURCE``): its checkout,
    else the source pip recorded, else a wheel re-packed into ``package_dir/.snodo-wheel/``."""
    root = Path(snodo.__file__).resolve().parent.parent
    try:
        text = (root / "pyproject.toml").read_text(encoding="utf-8")
    except OSError:
        text = ""
    if re.search(rf'(?m)^name\s*=\s*"{DISTRIBUTION}"\s*$', text):
        return str(root)
    return _recorded_source() or _repacked_wheel(package_dir / ".snodo-wheel")


def _recorded_source() -> str | None:
    """The install source in ``direct_url.json`` (PEP 610), when it can be used again."""
    try:
        raw = metadata.distribution(DISTRIBUTION).read_text("direct_url.json")
        info = json.loads(raw) if raw else None
    except (metadata.PackageNotFoundError, ValueError):
        return None
    if not isinstance(info, dict) or not isinstance(info.get("url"), str):
        return None
    url, vcs = info["url"], info.get("vcs_info")
    if isinstance(vcs, dict) and isinstance(vcs.get("commit_id"), str):
        return f"{vcs.get('vcs', 'git')}+{url}@{vcs['commit_id']}"
    parsed = urlparse(url)
    if parsed.scheme == "file" and Path(unquote(parsed.path)).exists():
        return unquote(parsed.path)
    return None


def _repacked_wheel(directory: Path) -> str | None:
    """A wheel of the installed snodo, from the files its RECORD lists (nothing is built)."""
    try:
        dist = metadata.distribution(DISTRIBUTION)
    except metadata.PackageNotFoundError:
        return None
    # Console scripts (outside site-packages, ``../../bin``) are made again from
    # entry_points.txt on install; byte-code and the installer's own records are not shipped.
    skip = (".pyc", "direct_url.json", "INSTALLER", "RECORD", "REQUESTED")
    files = [f for f in dist.files or () if ".." not in f.parts and not str(f).endswith(skip)]
    info = next((f.parts[0] for f in files if str(f).endswith(".dist-info/METADATA")), None)
    if info is None:
        return None
    directory.mkdir(parents=True, exist_ok=True)
    wheel = directory / f"{DISTRIBUTION.replace('-', '_')}-{dist.version.replace('-', '_')}-py3-none-any.whl"
    _write_wheel(wheel, info, files)
    return str(wheel)


def _write_wheel(wheel: Path, info: str, files: list[Any]) -> None:
    """Write ``files`` (installed package paths) into ``wheel`` with the RECORD that lists them."""
    record = []
    with zipfile.ZipFile(wheel, "w", zipfile.ZIP_DEFLATED) as out:
        for f in files:
            located = Path(str(f.locate()))
            if not located.is_file():
                continue
            data = located.read_bytes()
            out.writestr(str(f), data)
            digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
            record.append(f"{f},sha256={digest},{len(data)}")
        out.writestr(f"{info}/RECORD", "\n".join([*record, f"{info}/RECORD,,"]) + "\n")


USAGE = {
    "coder": "modes:\n  - mode_id: producer\n    # ...\n    coder: {plugin}",
    "validator": (
        "validators:\n  - validator_id: syntax\n    validator_type: {plugin}\n    evaluation_phase: post_execute"
    ),
}


def package_files(kind: str, name: str) -> dict[str, str]:
    """Every file of the new package, by path relative to its directory."""
    dist, plugin, module = names(kind, name)
    fields = {
        "dist": dist,
        "plugin": plugin,
        "module": module,
        "kind": kind,
        "pin": SNODO_PIN,
        "dist_snodo": DISTRIBUTION,
        "description": f"A snodo {kind}: {plugin}",
    }
    fields["usage"] = USAGE[kind].format(**fields)
    templates = resources.files(__package__).joinpath("plugin_template")
    sources = {
        "pyproject.toml": "pyproject.toml",
        "tox.ini": "tox.ini",
        "README.md": "README.md",
        "conftest.py": "conftest.py",
        f"src/{module}/__init__.py": f"{kind}.py",
        f"tests/test_{module}.py": f"{kind}_test.py",
    }
    files = {
        rel: templates.joinpath(f"{src}.tmpl").read_text(encoding="utf-8").format(**fields)
        for rel, src in sources.items()
    }
    return {**files, f"src/{module}/py.typed": ""}


@click.group()
def plugin() -> None:
    """Write a new coder or validator plugin package."""


@plugin.command("new")
@click.argument("kind", type=click.Choice(["coder", "validator"]))
@click.argument("name")
@dir_option("parent", "Directory to create the package in.", default=Path(), show_default="the current directory")
@json_option
def new(kind: str, name: str, parent: Path, as_json: bool) -> None:
    """Write a ready plugin package snodo-NAME that passes the conformance kit as generated.

    \b
    Then:
      cd snodo-NAME && pip install -e '.[test]' && pytest
      pytest -p snodo_conformance.plugin --snodo-coder NAME   (or --snodo-validator NAME)
    """
    dist, plugin_name, _module = names(kind, name)
    target = parent / dist
    if target.exists():
        raise SnodoError(f"{target} already exists", hint="choose another NAME or --dir, or remove it")
    files = package_files(kind, name)
    for rel, content in files.items():
        path = target / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(content, encoding="utf-8")
    if as_json:
        emit_json({"path": str(target), "kind": kind, "name": plugin_name, "files": sorted(files)})
        return
    click.echo(f"wrote {target}/ ({kind} {plugin_name!r}, {len(files)} files)")
    click.echo(f"next: cd {target} && pip install -e '.[test]' && pytest; see its README.md")
    # Said, not written: a path of this machine has no place in files a team commits.
    source = snodo_source(target)
    if source is not None:
        click.echo(
            f"tox takes snodo from the package index; to test against this installation: SNODO_SOURCE={source} tox"
        )
