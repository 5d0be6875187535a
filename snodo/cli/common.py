"""Shared plumbing for commands: finding and loading the protocol with the plugin host."""

from __future__ import annotations

import functools
import os
import sys
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar, cast

import click

from snodo.base.errors import EnvironmentProblem, ProtocolError, SnodoError, StateError
from snodo.cli.output import is_quiet, print_warning
from snodo.state.home import snodo_home

if TYPE_CHECKING:
    from snodo.plugin.host import PluginHost
    from snodo.protocol import LoadedProtocol

F = TypeVar("F", bound=Callable[..., Any])


protocol_option = click.option(
    "--protocol",
    "protocol_path",
    type=click.Path(dir_okay=False, path_type=Path),
    default=None,
    help="Protocol file to use (default: the nearest .snodo/protocol.yml).",
)
json_option = click.option(
    "--json", "as_json", is_flag=True, help="Print one JSON object on stdout (errors too: error, hint, exit_code)."
)


def dir_option(dest: str, help: str, **extra: Any) -> Callable[[F], F]:
    return click.option("--dir", dest, type=click.Path(file_okay=False, path_type=Path), help=help, **extra)


def project_options(func: F) -> F:
    """``--protocol`` and ``--json``, the options of every command that reads a project."""
    return protocol_option(json_option(func))


def could_not_run(func: F) -> F:
    """A :class:`SnodoError` escaping ``func`` means the command could not run: exit 4."""

    @functools.wraps(func)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        try:
            return func(*args, **kwargs)
        except SnodoError as exc:
            exc.exit_code = 4
            raise

    return cast(F, wrapper)


def load_project(
    protocol_path: Path | None, *, refuse_drift: bool = True, on_pinned: Callable[[Path], None] | None = None
) -> tuple[LoadedProtocol, PluginHost]:
    """The protocol in force (as committed: docs/protocol.md), loaded strictly with the plugins; warnings
    on stderr. A differing working-tree copy is refused with ``refuse_drift``, else reported.
    ``on_pinned(root)`` runs once git was asked about the protocol's history, before the plugins load."""
    from snodo.plugin.host import get_plugin_manager  # noqa: PLC0415 only the commands that load a project pay for it
    from snodo.protocol import find_protocol, load_protocol, project_root_for  # noqa: PLC0415 only the commands that load a project pay for it
    from snodo.protocol.committed import refuse_drift as refuse  # noqa: PLC0415 only the commands that load a project pay for it
    from snodo.protocol.committed import resolve  # noqa: PLC0415 only the commands that load a project pay for it

    found = find_protocol(Path.cwd(), protocol_path)
    in_force = resolve(found, cache_dir=snodo_home() / "cache" / "git")  # where agents cannot write
    if on_pinned is not None:
        on_pinned(project_root_for(found))
    host = get_plugin_manager()
    for who, error in host.failures():
        print_warning(f"{who} was not loaded: {error}")
    if refuse_drift:
        refuse(found, in_force)
    loaded = load_protocol(found, host, in_force=in_force)
    if loaded.in_force is not None:
        _report_in_force(loaded.in_force)
    for w in loaded.warnings:
        print_warning(str(w))
    return loaded, host


def _report_in_force(state: Any) -> None:
    from snodo.protocol.committed import REMEDY  # noqa: PLC0415 only the commands that load a project pay for it

    if state.warning and not is_quiet():  # a note, like progress: --quiet silences it
        print_warning(state.warning)
    if state.not_in_force:  # only `validate` gets here: run and serve refused it
        print_warning(f"{state.not_in_force}: judging with the version in force (commit {state.commit}); {REMEDY}")
    elif state.drift:
        print_warning(f"judging with the committed protocol, not the working tree: {state.drift.splitlines()[0]}")


def signers_in_force(protocol_path: Path | None) -> str | None:
    """The ``allowed_signers`` text in force (the committed list, never the working-tree file)."""
    from snodo.protocol import find_protocol  # noqa: PLC0415 only the commands that read decisions pay for it
    from snodo.protocol.committed import resolve  # noqa: PLC0415 only the commands that load a project pay for it

    return resolve(find_protocol(Path.cwd(), protocol_path), cache_dir=snodo_home() / "cache" / "git").signers


def project_root(protocol_path: Path | None) -> Path:
    """The project directory, without loading plugins or the protocol."""
    from snodo.protocol import find_protocol, project_root_for  # noqa: PLC0415 only the commands that load a project pay for it

    path = find_protocol(Path.cwd(), protocol_path)
    if not path.is_file():
        raise ProtocolError(
            f"{path}: no protocol file here", hint="run `snodo init` in the project, or pass --protocol PATH"
        )
    return project_root_for(path)


def git_work_tree(where: Path) -> Path:
    """The top of the git work tree ``where`` lies in (``where`` itself in a bare repository, as
    in a pre-receive hook); outside any, an error naming the directory instead of git's own."""
    from snodo.git.runner import run_git  # noqa: PLC0415 only the commands that load a project pay for it

    if not run_git(where, "rev-parse", "--git-dir").ok:
        raise EnvironmentProblem(
            f"{where} is not inside a git repository",
            hint="run it from the repository's work tree (cd into your clone)",
        )
    top = run_git(where, "rev-parse", "--show-toplevel")
    return Path(top.stdout.strip()) if top.ok and top.stdout.strip() else where


def read_spec(spec: str | None) -> str:
    if spec is None and sys.stdin.isatty():
        raise SnodoError(
            "no task spec given",
            hint="pass it as text, @FILE (the file's content), - (stdin), or @@text for text starting with @",
        )
    if spec is None or spec == "-":
        text = sys.stdin.read()
    elif spec.startswith("@@"):
        text = spec[1:]
    elif spec.startswith("@"):
        path = Path(spec[1:])
        try:
            text = path.read_text(encoding="utf-8")
        except OSError as exc:
            raise SnodoError(
                f"cannot read the spec file {path}: {exc.strerror or exc}",
                hint="a spec starting with @ names a file; write @@ to pass text that starts with @",
            ) from None
    else:
        text = spec
    if not text.strip():
        raise SnodoError("the task spec is empty")
    return text


def audit_event(root: Path, event: str, *, mode: str | None, data: dict[str, Any]) -> None:
    from snodo.state.audit import AuditLog  # noqa: PLC0415 only the commands that write the log pay for it
    from snodo.state.runtime import audit_log_path  # noqa: PLC0415 only the commands that write the log pay for it

    AuditLog(audit_log_path(root)).append(event, mode=mode, data=data)


def refuse_when_confined(command: str) -> None:
    if os.environ.get("SNODO_SANDBOX_RUN"):  # the Landlock backend marks its children
        raise StateError(f"`{command}` is refused here: it is a person's act, not confined code's")


def confirm(question: str, refusal: SnodoError, *, err: bool = True) -> None:
    """Ask the person on a terminal; with none to ask on, raise ``refusal`` rather than assume."""
    if not sys.stdin.isatty():
        raise refusal
    click.confirm(question, abort=True, err=err)
