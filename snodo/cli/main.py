"""The ``snodo`` command: a lazy click group, so ``snodo --help`` imports almost nothing.

Each subcommand lives in its own module and is imported only when invoked. Errors raised
as :class:`~snodo.errors.SnodoError` print one clear message (no traceback unless ``-v``)
and exit with the error's code.
"""

from __future__ import annotations

import contextlib
import importlib
import importlib.util
import os
import signal
import sys
from typing import Any

import click

from snodo import __version__

#: name -> (module, attribute, one-line help shown by `snodo --help` without importing it)
COMMANDS: dict[str, tuple[str, str, str]] = {
    "init": ("snodo.cli.init_cmd", "init", "Write .snodo/protocol.yml from a template."),
    "protocol": ("snodo.cli.protocol_cmd", "protocol", "Check a protocol's well-formedness."),
    "plugins": ("snodo.cli.plugins_cmd", "plugins", "List installed plugins and what they register."),
    "plugin": ("snodo.cli.plugin_cmd", "plugin", "Write a new coder or validator plugin package."),
    "validate": ("snodo.cli.validate_cmd", "validate", "Run one phase of validators on a task spec."),
    "authorize": ("snodo.cli.authorize_cmd", "authorize", "List or sign pending human decisions."),
    "audit": ("snodo.cli.audit_cmd", "audit", "Verify or show the hash-chained audit log."),
    "run": ("snodo.cli.run_cmd", "run", "Run a task through the governed loop."),
    "serve": ("snodo.cli.serve_cmd", "serve", "Serve a mode's tools to an agent over MCP (stdio)."),
    "session": ("snodo.cli.session_cmd", "session", "List or show governance sessions."),
    "jobs": ("snodo.cli.jobs_cmd", "jobs", "List or show background jobs."),
    "demo": ("snodo.cli.demo_cmd", "demo", "Walk the whole life cycle in a throwaway repository."),
    "doctor": ("snodo.cli.doctor_cmd", "doctor", "Show which sandbox backend confines agent code here."),
}


class LazyGroup(click.Group):
    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted(n for n, (mod, _a, _h) in COMMANDS.items() if importlib.util.find_spec(mod) is not None)

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        entry = COMMANDS.get(cmd_name)
        if entry is None:
            return None
        module_name, attr, _help = entry
        try:
            module = importlib.import_module(module_name)
        except ModuleNotFoundError as exc:
            if exc.name == module_name:
                return None
            raise
        command: click.Command = getattr(module, attr)
        return command

    def format_commands(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        rows = [(name, COMMANDS[name][2]) for name in self.list_commands(ctx)]
        if rows:
            with formatter.section("Commands"):
                formatter.write_dl(rows)


@click.group(cls=LazyGroup, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="snodo")
@click.option("-v", "--verbose", is_flag=True, help="Show tracebacks and more detail on errors.")
@click.pass_context
def cli(ctx: click.Context, verbose: bool) -> None:
    """snodo — governance for AI-assisted software development.

    A team declares its process in .snodo/protocol.yml (modes, capabilities, validators,
    policy); snodo runs the real validators and turns their verdicts into one of four
    outcomes: pass, escalate (a human signs with `snodo authorize`), blocker (never
    overridable) or validator_error. Every step lands in a hash-chained audit log.

    \b
    Start here:
      snodo demo                      the whole life cycle in a throwaway repository
      snodo init --template solo      write .snodo/protocol.yml in your repository
      snodo run "add a hello module" --mock
    """
    ctx.ensure_object(dict)
    ctx.obj["verbose"] = verbose
    if verbose:
        os.environ["SNODO_VERBOSE"] = "1"


def _on_sigterm(signum: int, _frame: object) -> None:
    """Kill the child trees snodo started, then die of SIGTERM as before."""
    from snodo.proc import terminate_all

    terminate_all()
    signal.signal(signum, signal.SIG_DFL)
    os.kill(os.getpid(), signum)


def main(argv: list[str] | None = None) -> None:
    from snodo.errors import SnodoError

    with contextlib.suppress(ValueError):  # not the main thread (embedded use): leave it
        signal.signal(signal.SIGTERM, _on_sigterm)

    verbose = "-v" in (argv or sys.argv[1:]) or "--verbose" in (argv or sys.argv[1:])
    try:
        rv: Any = cli.main(args=argv, prog_name="snodo", standalone_mode=False)
    except click.exceptions.Abort:
        click.echo("aborted", err=True)
        sys.exit(130)
    except click.ClickException as exc:
        exc.show()
        sys.exit(exc.exit_code)
    except SnodoError as exc:
        if verbose:
            import traceback

            traceback.print_exc()
        from snodo.cli.output import print_error

        print_error(exc)
        sys.exit(exc.exit_code)
    except KeyboardInterrupt:
        from snodo.proc import terminate_all

        terminate_all()
        click.echo("interrupted", err=True)
        sys.exit(130)
    except Exception as exc:
        if verbose:
            import traceback

            traceback.print_exc()
        click.echo(f"internal error: {type(exc).__name__}: {exc}", err=True)
        click.echo("  hint: run again with -v for the traceback, and report it", err=True)
        sys.exit(4)
    sys.exit(rv if isinstance(rv, int) else 0)


if __name__ == "__main__":  # pragma: no cover
    main()
