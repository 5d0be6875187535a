"""``snodo plugin new coder|validator NAME``: a ready plugin package that passes the kit.

The package: a ``pyproject.toml`` with the ``snodo`` entry point, a src layout, a working
plugin to start from, a test using the author harness, a ``tox.ini`` with a ``conformance``
env, and a README with the install steps (docs/plugins.md). snodo itself is required by its
distribution name on the package index, :data:`SNODO_PIN` (the index's ``snodo`` is an
unrelated project). Nothing generated names a path of this machine: a team commits these
files, and ``tox`` takes snodo from ``SNODO_SOURCE`` when set, else from the index.
"""

from __future__ import annotations

import re
from pathlib import Path

import click

from snodo import DISTRIBUTION
from snodo.base.errors import SnodoError
from snodo.cli.common import json_option

#: The requirement a plugin puts on snodo: the plugin API it is generated against.
SNODO_PIN = f"{DISTRIBUTION}>=0.3"

NAME_RE = re.compile(r"^[a-z][a-z0-9]*(-[a-z0-9]+)*$")


class PluginNewError(SnodoError):
    exit_code = 4


def names(kind: str, name: str) -> tuple[str, str, str]:
    """``(distribution, plugin name, module)`` for NAME: ``my-check`` gives
    ``snodo-my-check``, ``my-check`` and ``snodo_my_check``."""
    if not NAME_RE.match(name) or len(name) > 50:
        raise PluginNewError(
            f"{name!r} is not a usable {kind} name",
            hint="use lowercase letters, digits and single dashes, starting with a letter (e.g. my-check)",
        )
    plugin = name.removeprefix("snodo-") or name
    dist = f"snodo-{plugin}"
    return dist, plugin, dist.replace("-", "_")


def snodo_source(package_dir: Path | None = None) -> str | None:
    """Where the running snodo can be installed from again (told to the author as ``SNODO_SOURCE``).

    In order: the checkout it runs from (an editable install); the source pip recorded
    when it was installed (``direct_url.json``: a local directory or wheel that still
    exists, or a VCS URL at its commit); else a wheel re-packed from the installed files
    themselves, written into ``package_dir/.snodo-wheel/``. ``None`` when none of these works.
    """
    import snodo

    root = Path(snodo.__file__).resolve().parent.parent
    try:
        text = (root / "pyproject.toml").read_text(encoding="utf-8")
    except OSError:
        text = ""
    if re.search(rf'(?m)^name\s*=\s*"{DISTRIBUTION}"\s*$', text):
        return str(root)
    recorded = _recorded_source()
    if recorded is not None:
        return recorded
    return _repacked_wheel(package_dir / ".snodo-wheel") if package_dir is not None else None


def _recorded_source() -> str | None:
    """The install source in ``direct_url.json`` (PEP 610), when it can be used again."""
    import json
    from importlib import metadata
    from urllib.parse import unquote, urlparse

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
    import zipfile
    from importlib import metadata

    try:
        dist = metadata.distribution(DISTRIBUTION)
    except metadata.PackageNotFoundError:
        return None
    import base64
    import hashlib

    # Console scripts (outside site-packages, ``../../bin``) are made again from
    # entry_points.txt on install; byte-code and the installer's own records are not shipped.
    skip = (".pyc", "direct_url.json", "INSTALLER", "RECORD", "REQUESTED")
    files = [f for f in dist.files or () if ".." not in Path(str(f)).parts and not str(f).endswith(skip)]
    info = next((str(f).split("/")[0] for f in files if str(f).endswith(".dist-info/METADATA")), None)
    if info is None:
        return None
    wheel = directory / f"{DISTRIBUTION.replace('-', '_')}-{dist.version.replace('-', '_')}-py3-none-any.whl"
    directory.mkdir(parents=True, exist_ok=True)
    record = []
    with zipfile.ZipFile(wheel, "w", zipfile.ZIP_DEFLATED) as out:
        for f in files:
            located = Path(str(f.locate()))
            if located.is_file():
                data = located.read_bytes()
                out.writestr(str(f), data)
                digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
                record.append(f"{f},sha256={digest},{len(data)}")
        out.writestr(f"{info}/RECORD", "\n".join([*record, f"{info}/RECORD,,"]) + "\n")
    return str(wheel)


PYPROJECT = """\
[build-system]
requires = ["setuptools>=77"]
build-backend = "setuptools.build_meta"

[project]
name = "{dist}"
version = "0.1.0"
description = "{description}"
readme = "README.md"
requires-python = ">=3.11"
# snodo itself, by its name on the package index (the index's "snodo" is an unrelated project)
dependencies = ["{pin}"]

[project.optional-dependencies]
test = ["pytest>=8.3"]

# How snodo finds the plugin: one entry point in the group `snodo`.
[project.entry-points.snodo]
{plugin} = "{module}"

[tool.setuptools.packages.find]
where = ["src"]

[tool.pytest.ini_options]
testpaths = ["tests"]
addopts = ["-ra", "--strict-markers", "-p", "no:cacheprovider"]
xfail_strict = true
"""

TOX = """\
# tox 4: `tox` runs the plugin's own tests and the snodo conformance kit against it.
[tox]
min_version = 4.20
env_list = py, conformance

[snodo]
# Where snodo comes from: SNODO_SOURCE when set (a checkout, a wheel or a git URL, e.g.
# `SNODO_SOURCE=../snodo tox`), else the package index.
source = {{env:SNODO_SOURCE:{pin}}}

[testenv]
description = the plugin's own tests (the author harness runs real snodo commands)
deps = {{[snodo]source}}
extras = test
set_env =
    LITELLM_LOCAL_MODEL_COST_MAP = True
commands =
    pytest {{posargs}}

[testenv:conformance]
description = the snodo conformance kit against this plugin, from an empty directory
change_dir = {{env_tmp_dir}}
commands_pre =
    python -c "open('pytest.ini', 'w').write('[pytest]')"
commands =
    pytest -p snodo_conformance.plugin -p no:cacheprovider -rs --snodo-{kind} {plugin} \\
        --snodo-report={{env_tmp_dir}}{{/}}conformance-report.json {{posargs}}
"""

CONFTEST = """\
# The author harness: the `snodo_project` fixture runs real `snodo run` / `snodo validate`.
pytest_plugins = ["snodo_conformance.harness"]
"""

CODER = '''\
"""{dist}: a snodo coder. It writes the task down in a file; make generate() do real work.

snodo finds it through the `snodo` entry point in pyproject.toml; `snodo plugins` lists it.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from snodo.api import CoderCapabilities, CoderRequest, CoderResult, CoderSpec, FileOperation, hookimpl

NAME = "{plugin}"


class TaskNoteCoder:
    """Proposes one file holding the task (and, on a fix attempt, the findings to address).

    It proposes file operations and lets the engine write them: the engine filters every
    path (never .snodo/, .git/ or a protected path) and commits on a task branch.
    """

    def __init__(self, config: Mapping[str, Any]) -> None:  # checked against `settings` already
        self.path = str(config.get("path", "TASK.md"))

    def generate(self, request: CoderRequest) -> CoderResult:
        lines = [f"# {{request.task_id}}", "", request.spec.strip(), ""]
        if request.findings:  # a fix attempt (request.attempt > 0): what the validators said
            lines += ["## Findings to address", "", *(f"- {{finding}}" for finding in request.findings), ""]
        operation = FileOperation(op="write", path=self.path, content="\\n".join(lines))
        return CoderResult(operations=(operation,), summary=f"wrote the task to {{self.path}}")


@hookimpl
def snodo_coders() -> Any:
    yield CoderSpec(
        name=NAME,
        description="Writes the task down in a file (a starting point for a real coder)",
        capabilities=CoderCapabilities(
            writes_in_place=False,
            commits_own_changes=False,
            settings=("path",),
            needs_network=False,
            deterministic=True,
        ),
    )


@hookimpl
def snodo_generate(name: str, request: CoderRequest) -> CoderResult | None:
    if name != NAME:
        return None  # another coder this plugin registers (it registers only one)
    return TaskNoteCoder(request.config).generate(request)
'''

VALIDATOR = '''\
"""{dist}: a snodo validator. It blocks changed Python files that do not parse.

snodo finds it through the `snodo` entry point in pyproject.toml; `snodo plugins` lists it.
"""

from __future__ import annotations

import ast
from pathlib import Path
from typing import Any

from snodo.api import ValidationRequest, ValidatorSpec, Verdict, hookimpl

NAME = "{plugin}"


@hookimpl
def snodo_validators() -> Any:
    yield ValidatorSpec(
        name=NAME,
        description="Blocks changed Python files that do not parse",
        settings=("max_bytes",),
        deterministic=True,
    )


@hookimpl
def snodo_validate(name: str, request: ValidationRequest) -> Verdict | None:
    if name != NAME:
        return None  # a type this plugin does not register: no verdict
    limit = int(request.validator.tooling.get("max_bytes", 1_000_000))
    root = Path(request.workspace)
    if not root.is_dir():  # never pass what could not be looked at: raising is an error result
        raise FileNotFoundError(f"the workspace {{root}} does not exist")
    problems, skipped, checked = [], [], 0
    for rel in request.changed_files:
        path = root / rel
        if not rel.endswith(".py") or not path.is_file():
            continue
        data = path.read_bytes()
        if len(data) > limit:
            skipped.append(rel)
            continue
        checked += 1
        try:
            ast.parse(data, filename=rel)
        except SyntaxError as exc:
            problems.append(f"{{rel}}:{{exc.lineno}}: {{exc.msg}}")
    if problems:
        return Verdict(
            severity="blocker", justification="; ".join(problems), details={{"syntax_errors": problems}}
        )
    if skipped:
        return Verdict(
            severity="warn",
            justification=f"not checked, larger than {{limit}} bytes: {{', '.join(skipped)}}",
            details={{"skipped": skipped}},
        )
    return Verdict(severity="pass", justification=f"{{checked}} changed Python file(s) parse")
'''

CODER_TEST = '''\
"""End to end: the real `snodo run` with this coder on a sample project."""


def test_a_run_completes_with_the_task_written_down(snodo_project):
    project = snodo_project(coder="{plugin}")
    result = project.run("Write down this task")
    assert result.outcome == "completed", result.output
    assert "TASK.md" in result.data["files"]
    assert "completed" in result.events()  # the audit log, oldest first
'''

VALIDATOR_TEST = '''\
"""End to end: the real `snodo run` (mock coder) judged by this validator."""


def test_a_syntax_error_is_a_blocker(snodo_project):
    project = snodo_project(validator="{plugin}", coder_config={{"files": {{"broken.py": "def f(:\\n"}}}})
    result = project.run("add broken.py")
    assert result.outcome == "blocker", result.output
    assert "validate" in result.events()


def test_valid_python_passes(snodo_project):
    project = snodo_project(validator="{plugin}", coder_config={{"files": {{"ok.py": "x = 1\\n"}}}})
    result = project.run("add ok.py")
    assert result.outcome == "completed", result.output
'''

README = """\
# {dist}

A snodo {kind} plugin: `{plugin}`. Generated by `snodo plugin new {kind} {plugin}`.

## Install (a fresh machine)

snodo's distribution is `{dist_snodo}` (the package index's `snodo` is an unrelated
project); this package requires `{pin}`, so installing it brings snodo along.

```sh
python -m venv .venv && . .venv/bin/activate
pip install -e '.[test]'          # this package and {dist_snodo}
snodo plugins                     # lists {plugin}
```

To develop against a checkout of snodo instead, install it first: `pip install /path/to/snodo`.

## Test

```sh
pytest                                                        # end to end, with the author harness
pytest -p snodo_conformance.plugin --snodo-{kind} {plugin}    # the conformance kit, from any directory
tox                                                           # both, in fresh environments
```

`tox` installs snodo from the package index (`{pin}`). To test against another snodo,
point `SNODO_SOURCE` at a checkout, a wheel or a git URL: `SNODO_SOURCE=/path/to/snodo tox`.
The conformance env writes a JSON report (`--snodo-report`).

## Use

In `.snodo/protocol.yml`:

```yaml
{usage}
```

See snodo's docs/plugins.md and docs/conformance.md.
"""

USAGE = {
    "coder": "modes:\n  - mode_id: producer\n    # ...\n    coder: {plugin}",
    "validator": (
        "validators:\n  - validator_id: syntax\n    validator_type: {plugin}\n    evaluation_phase: post_execute"
    ),
}


def package_files(kind: str, name: str) -> dict[str, str]:
    """Every file of the new package, by path relative to its directory (none names a path of this machine)."""
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
    return {
        "pyproject.toml": PYPROJECT.format(**fields),
        "tox.ini": TOX.format(**fields),
        "README.md": README.format(**fields),
        "conftest.py": CONFTEST,
        f"src/{module}/__init__.py": (CODER if kind == "coder" else VALIDATOR).format(**fields),
        f"src/{module}/py.typed": "",
        f"tests/test_{module}.py": (CODER_TEST if kind == "coder" else VALIDATOR_TEST).format(**fields),
    }


@click.group()
def plugin() -> None:
    """Write a new coder or validator plugin package."""


@plugin.command("new")
@click.argument("kind", type=click.Choice(["coder", "validator"]))
@click.argument("name")
@click.option(
    "--dir",
    "parent",
    type=click.Path(file_okay=False, path_type=Path),
    default=Path(),
    show_default="the current directory",
    help="Directory to create the package in.",
)
@json_option
def new(kind: str, name: str, parent: Path, as_json: bool) -> None:
    """Write a ready plugin package snodo-NAME that passes the conformance kit as generated.

    \b
    Then:
      cd snodo-NAME && pip install -e '.[test]' && pytest
      pytest -p snodo_conformance.plugin --snodo-coder NAME   (or --snodo-validator NAME)
    """
    from snodo.cli.output import console, emit_json

    dist, plugin_name, _module = names(kind, name)
    target = parent / dist
    if target.exists():
        raise PluginNewError(f"{target} already exists", hint="choose another NAME or --dir, or remove it")
    files = package_files(kind, name)
    for rel, content in files.items():
        path = target / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(content, encoding="utf-8")
    if as_json:
        emit_json({"path": str(target), "kind": kind, "name": plugin_name, "files": sorted(files)})
        return
    console().print(f"wrote {target}/ ({kind} {plugin_name!r}, {len(files)} files)", markup=False, highlight=False)
    console().print(
        f"next: cd {target} && pip install -e '.[test]' && pytest; see its README.md", markup=False, highlight=False
    )
    # Said, not written: a path of this machine has no place in files a team commits.
    source = snodo_source(target)
    if source is not None:
        console().print(
            f"tox takes snodo from the package index; to test against this installation: SNODO_SOURCE={source} tox",
            markup=False,
            highlight=False,
            soft_wrap=True,  # a path to copy: never broken across lines
        )
