"""The ``snodo`` command: a lazy click group (each subcommand's module is imported only
when invoked), and the one place errors leave the program."""

from __future__ import annotations

import atexit
import contextlib
import importlib
import itertools
import os
import signal
import sys
import threading
from typing import Any, NoReturn

import click

from snodo.base.errors import PathValidationError, ProtocolError, SnodoError, TokenError
from snodo.cli.output import emit_error_json, is_quiet, print_error_text, print_note, set_quiet

#: name -> (module, attribute, one-line help shown by `snodo --help` without importing it)
COMMANDS: dict[str, tuple[str, str, str]] = {
    "init": ("snodo.cli.init_cmd", "init", "Write .snodo/protocol.yml from a template."),
    "protocol": ("snodo.cli.protocol_cmd", "protocol", "Check a protocol's well-formedness."),
    "plugins": ("snodo.cli.plugins_cmd", "plugins", "List installed plugins and what they register."),
    "plugin": ("snodo.cli.plugin_cmd", "plugin", "Write a new coder or validator plugin package."),
    "validate": ("snodo.cli.validate_cmd", "validate", "Run one phase of validators on a task spec."),
    "authorize": ("snodo.cli.authorize_cmd", "authorize", "List or sign pending human decisions."),
    "audit": ("snodo.cli.audit_cmd", "audit", "Verify, show or export the signed audit log."),
    "keys": ("snodo.cli.keys_cmd", "keys", "Show your keys' allowed_signers lines, or protect the decision key."),
    "verify": ("snodo.cli.verify_cmd", "verify", "Check a range of commits: governed runs or signed by a person."),
    "attest": ("snodo.cli.attest_cmd", "attest", "Show the attestation a governed commit carries."),
    "push": ("snodo.cli.attest_cmd", "push", "Push a branch and the attestations (refs/notes/snodo) with it."),
    "run": ("snodo.cli.run_cmd", "run", "Run a task through the governed loop."),
    "serve": ("snodo.cli.serve_cmd", "serve", "Serve a mode's tools to an agent over MCP (stdio)."),
    "session": ("snodo.cli.session_cmd", "session", "List, show or close governance sessions."),
    "jobs": ("snodo.cli.jobs_cmd", "jobs", "List, show or prune runs and background jobs."),
    "demo": ("snodo.cli.demo_cmd", "demo", "Walk the whole life cycle in a throwaway repository."),
    "doctor": ("snodo.cli.doctor_cmd", "doctor", "Show which sandbox backend confines agent code here."),
}


class LazyGroup(click.Group):
    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted(COMMANDS)

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        if cmd_name not in COMMANDS:
            return None
        module, attr, _help = COMMANDS[cmd_name]
        command: click.Command = getattr(importlib.import_module(module), attr)
        return command

    def format_commands(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        with formatter.section("Commands"):
            formatter.write_dl([(name, COMMANDS[name][2]) for name in self.list_commands(ctx)])


@click.group(cls=LazyGroup, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(package_name="snodo-governance", prog_name="snodo")  # the distribution, resolved only when asked
@click.option("-v", "--verbose", is_flag=True, help="Show tracebacks and more detail on errors.")
@click.option("-q", "--quiet", is_flag=True, help="No progress or spinners on stderr (results and errors still print).")
def cli(verbose: bool, quiet: bool) -> None:
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

    \b
    Output: results on stdout, progress on stderr (-q silences it). With --json every
    command prints exactly one JSON object on stdout, errors included:
    {"error": ..., "hint": ..., "exit_code": N}. -q, -v and --json may come before or
    after the command.

    \b
    Exit codes (every command):
      0    done
      1    refused or halted by governance
           (validate: 1 blocker, 2 escalate, 3 validator_error)
      4    could not run: bad arguments, unknown ids, missing files, environment
      130  interrupted
    """

    set_quiet(quiet)
    if verbose:
        os.environ["SNODO_VERBOSE"] = "1"


def _on_sigterm(signum: int, _frame: object) -> None:
    """Kill the child trees snodo started, then die of SIGTERM."""
    from snodo.process.runner import terminate_all  # noqa: PLC0415 the process runner only when children may be running

    terminate_all()
    signal.signal(signum, signal.SIG_DFL)
    os.kill(os.getpid(), signum)


GLOBAL_FLAGS = frozenset({"-q", "--quiet", "-v", "--verbose"})


def hoist_global_options(args: list[str]) -> list[str]:
    """``-q``/``-v`` after the command moved before it, where click reads them, and ``--json``
    after the whole command path; nothing after ``--`` is touched."""
    end = args.index("--") if "--" in args else len(args)
    # spelled long: click's "no such option" for a short one imports difflib on every `snodo -q`
    flags = [{"-q": "--quiet", "-v": "--verbose"}.get(a, a) for a in args[:end] if a in GLOBAL_FLAGS]
    rest = [a for a in args[:end] if a not in GLOBAL_FLAGS]
    if "--json" in rest:
        rest = [a for a in rest if a != "--json"] + ["--json"]
    return [*flags, *rest, *args[end:]]


def exit_code_for(exc: SnodoError) -> int:
    """What the raiser set, else the error class's code, else 1 for a refused token or path, 4 otherwise."""
    if "exit_code" in vars(exc):
        return exc.exit_code
    if type(exc).exit_code != SnodoError.exit_code:
        return type(exc).exit_code
    return 1 if isinstance(exc, TokenError | PathValidationError) else 4


def _run(args: list[str]) -> Any:
    """The command, then (whatever its end) the one notice about the home's identity."""
    try:
        return cli.main(args=args, prog_name="snodo", standalone_mode=False)
    finally:  # unless no key was made and no list read: then there is nothing to say
        if not is_quiet() and {"snodo.state.keys", "snodo.protocol.committed"} & sys.modules.keys():
            from snodo.cli.keys_cmd import home_notice  # noqa: PLC0415 the keys command's module only when a notice is due

            if notice := home_notice():
                print_note(notice)


def main(argv: list[str] | None = None) -> NoReturn:
    try:
        _main(argv)
    except SystemExit as done:
        _leave(done.code)


#: snodo's threads that finish their work before the process leaves (an executor's idle workers never end).
_WAITED_FOR = frozenset({"snodo-serve-stop", "snodo-discard"})


def _leave(code: str | int | None) -> NoReturn:
    """Exit with ``code``. A live daemon thread (a model call abandoned at its deadline) may hold
    an import lock finalisation would wait on for ever: then run the exit handlers, flush and
    leave without finalising (every state write is atomic and already done), once snodo's own
    threads that are not daemons ended (``serve``'s stop records why the server stopped; a
    library's may never end)."""
    if not any(t.daemon and t.is_alive() for t in threading.enumerate()):
        sys.exit(code)
    for thread in threading.enumerate():
        if thread.name in _WAITED_FOR:
            thread.join()
    atexit._run_exitfuncs()  # what sys.exit would have run, before daemon threads are frozen
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(Exception):
            stream.flush()
    if code is not None and not isinstance(code, int):
        print(code, file=sys.stderr, flush=True)
    os._exit(code if isinstance(code, int) else 0 if code is None else 1)


def _main(argv: list[str] | None) -> NoReturn:
    """The one error edge (docs/architecture.md): every failure leaves here, as one message on
    stderr or, with ``--json``, one object on stdout."""
    args = hoist_global_options(list(sys.argv[1:] if argv is None else argv))
    verbose = "-v" in args or "--verbose" in args
    as_json = "--json" in itertools.takewhile(lambda a: a != "--", args)  # read raw: a parse error too

    def fail(message: str, hint: str | None, code: int, *, details: tuple[str, ...] = ()) -> NoReturn:
        failure = sys.exc_info()[1]
        if verbose and failure is not None and not isinstance(failure, click.ClickException):
            import traceback  # noqa: PLC0415 only under -v

            traceback.print_exc()
        if as_json:
            emit_error_json(message, hint=hint, exit_code=code, **({"problems": list(details)} if details else {}))
        else:
            print_error_text(message, hint, details)
        sys.exit(code)

    with contextlib.suppress(ValueError):  # not the main thread (embedded use): leave it
        signal.signal(signal.SIGTERM, _on_sigterm)

    try:
        rv: Any = _run(args)
    except click.exceptions.Abort:
        fail("aborted", None, 130)
    except click.exceptions.NoArgsIsHelpError as exc:
        if as_json:
            fail(exc.format_message(), "`snodo --help` lists the commands", 4)
        click.echo(exc.ctx.get_help() if exc.ctx else exc.format_message())
        sys.exit(0)
    except click.UsageError as exc:
        command = exc.ctx.command_path if exc.ctx else "snodo"
        fail(exc.format_message(), f"`{command} --help` shows the usage", 4)
    except click.ClickException as exc:
        fail(exc.format_message(), None, exc.exit_code)
    except SnodoError as exc:
        details: tuple[str, ...] = ()
        hint = exc.hint
        if isinstance(exc, ProtocolError):
            details = tuple(p for p in exc.problems if p != exc.message)
            if "docs/" not in (hint or ""):
                hint = (f"{hint}; " if hint else "") + "docs/protocol.md explains every field and rule"
        fail(exc.message, hint, exit_code_for(exc), details=details)
    except KeyboardInterrupt:
        from snodo.process.runner import terminate_all  # noqa: PLC0415 the process runner only when children may be running

        terminate_all()
        fail("interrupted", None, 130)
    except Exception as exc:
        fail(
            f"internal error: {type(exc).__name__}: {exc}",
            "run again with -v for the traceback, and report it",
            4,
        )
    sys.exit(rv if isinstance(rv, int) else 0)


if __name__ == "__main__":  # pragma: no cover
    main()
