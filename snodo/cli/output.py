"""Printing at the command-line edge (docs/architecture.md). rich is imported only for a
terminal: piped, snodo writes the same words plain itself and a script does not pay for rich."""

from __future__ import annotations

import functools
import json
import os
import re
import sys
import time
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from snodo.base.text import shown

if TYPE_CHECKING:
    from rich.console import Console, RenderableType
    from rich.live import Live
    from rich.spinner import Spinner

_quiet = False
_json_emitted = False


def stream_is_terminal(stream: Any) -> bool:
    """Whether rich would treat ``stream`` as a terminal, by its own rule (rich 13–15):
    ``TTY_COMPATIBLE`` (0 or 1), then ``FORCE_COLOR`` (set and non-empty), then ``isatty()``."""
    compatible = os.environ.get("TTY_COMPATIBLE", "")
    if compatible in ("0", "1"):
        return compatible == "1"
    force = os.environ.get("FORCE_COLOR")
    if force is not None:
        return force != ""
    try:
        return bool(stream.isatty())
    except (AttributeError, ValueError):  # no isatty, or a closed stream
        return False


def set_quiet(quiet: bool) -> None:
    global _quiet
    _quiet = quiet


def is_quiet() -> bool:
    return _quiet


def plain_stdout() -> bool:
    """stdout is a pipe or a file: plain lines, never wrapped (an identifier stays whole for grep)."""
    return not stream_is_terminal(sys.stdout)


@functools.cache
def console() -> Console:
    from rich.console import Console  # noqa: PLC0415 rich only when a person reads the output

    return Console(highlight=False, soft_wrap=plain_stdout())


@functools.cache
def err_console() -> Console:
    from rich.console import Console  # noqa: PLC0415 rich only when a person reads the output

    return Console(stderr=True, highlight=False)


def emit_json(obj: Any) -> None:
    """Print THE JSON object of this command on stdout (at most one per command)."""
    global _json_emitted
    _json_emitted = True
    print(json.dumps(obj, indent=2, sort_keys=False, default=str), flush=True)


def emit_error_json(error: str, *, hint: str | None, exit_code: int, **extra: Any) -> None:
    """A failed command's ``{error, hint, exit_code}``; as text on stderr once it printed its object."""
    if _json_emitted:
        print_error_text(error, hint)
        return
    emit_json({"error": error, "hint": hint, "exit_code": exit_code, **extra})


def _to_stderr(*lines: tuple[str, str, str]) -> None:
    """Lines on stderr, each ``(label, its style at a terminal, agent-suppliable text)``; piped,
    each stays one line for grep and logs."""
    if not stream_is_terminal(sys.stderr):
        print("\n".join(f"{label} {shown(text)}" for label, _style, text in lines), file=sys.stderr, flush=True)
        return
    from rich.markup import escape  # noqa: PLC0415 rich only when a person reads the output

    for label, style, text in lines:
        err_console().print(f"[{style}]{label}[/] {escape(shown(text))}" if style else f"{label} {escape(shown(text))}")


def print_error_text(message: str, hint: str | None = None, details: tuple[str, ...] = ()) -> None:
    hint_line = [("  hint:", "dim", hint)] if hint else []
    _to_stderr(("error:", "bold red", message), *(("  -", "", line) for line in details), *hint_line)


def print_warning(text: str) -> None:
    _to_stderr(("warning:", "yellow", text))


def print_note(text: str) -> None:
    """A fact that is not a problem with the input; like progress, ``--quiet`` silences it."""
    if not _quiet:
        _to_stderr(("note:", "dim", text))


def key_values(rows: Sequence[tuple[str, RenderableType]]) -> RenderableType:
    """A key/value grid whose values wrap, never cropped; off a terminal, :func:`plain_key_values`."""
    from rich.table import Table  # noqa: PLC0415 rich only when a person reads the output
    from rich.text import Text  # noqa: PLC0415 rich only when a person reads the output

    if plain_stdout():
        plain = [(key, value.plain if isinstance(value, Text) else str(value)) for key, value in rows]
        return Text(plain_key_values(plain))

    grid = Table.grid(padding=(0, 2))
    grid.add_column(style="bold", no_wrap=True)
    grid.add_column(overflow="fold")
    for key, value in rows:
        grid.add_row(key, value)
    return grid


#: the validator runner's progress lines: a validator (or constraint) starts, and finishes
_STARTED = re.compile(r"^(?P<phase>\w+): running (?P<name>\S+)")
_FINISHED = re.compile(r"^(?P<phase>\w+): (?:constraint )?(?P<name>\S+) → ")


class Progress:
    """Progress lines on stderr stamped with the time since the start (a finished validator's
    with how long it took); on a terminal a spinner names what still runs."""

    def __init__(self) -> None:
        self._start = time.monotonic()
        self._step_start = self._start
        self._step = ""
        self._running: dict[tuple[str, str], float] = {}
        self._live: Live | None = None
        self._spinner: Spinner | None = None

    def __enter__(self) -> Progress:
        if _quiet or not stream_is_terminal(sys.stderr):
            return self
        from rich.live import Live  # noqa: PLC0415 rich only when a person reads the output
        from rich.spinner import Spinner  # noqa: PLC0415 rich only when a person reads the output

        self._spinner = Spinner("dots", text="starting")
        self._live = Live(self, console=err_console(), refresh_per_second=4, transient=True, redirect_stdout=False)
        self._live.start()
        return self

    def __exit__(self, *exc: object) -> None:
        if self._live is not None:
            self._live.stop()
            self._live = None

    def status(self) -> str:
        """What the spinner says: the validators still running, else the latest step."""
        now = time.monotonic()
        if self._running:
            names = ", ".join(name for _phase, name in self._running)
            return f"running {names}  {now - min(self._running.values()):.0f}s"
        return f"{self._step or 'working'}  {now - self._step_start:.0f}s"

    def __rich__(self) -> RenderableType:
        from rich.text import Text  # noqa: PLC0415 rich only when a person reads the output

        assert self._spinner is not None
        self._spinner.update(text=Text(self.status(), style="dim"))
        return self._spinner

    def __call__(self, message: str, result: object = None) -> None:
        if _quiet:
            return
        now = time.monotonic()
        self._step, self._step_start = message, now
        took = ""
        if started := _STARTED.match(message):
            self._running[(started["phase"], started["name"])] = now
        elif finished := _FINISHED.match(message):
            self._running.pop((finished["phase"], finished["name"]), None)
        duration = getattr(result, "duration", None)  # results come in declared order: only one knows its time
        if isinstance(duration, int | float):
            took = f" (took {duration:.1f}s)"
        stamp = f"{now - self._start:6.1f}s · "
        if self._live is None and not stream_is_terminal(sys.stderr):
            print(f"{stamp}{shown(message)}{took}", file=sys.stderr, flush=True)
            return
        from rich.markup import escape  # noqa: PLC0415 rich only when a person reads the output

        err_console().print(f"[dim]{stamp}{escape(shown(message))}{took}[/]")  # the live display's console too


#: how much of one validator's justification a table shows (test output can be pages long)
JUSTIFICATION_CHARS = 600


def _result_cells(r: dict[str, Any], *, with_type: bool, more: str) -> list[str]:
    """One result's cells, escaped. A long justification keeps its head (where judges put the
    summary) and its tail (where a command's output ends), and says where the whole text is."""
    text = str(r.get("justification", ""))
    if len(text) > JUSTIFICATION_CHARS:
        head, tail = JUSTIFICATION_CHARS * 2 // 3, JUSTIFICATION_CHARS // 3
        text = text[:head] + " … " + text[-tail:] + (f"\n({more})" if more else "")
    severity = str(r.get("severity"))
    if r.get("severity_original"):
        severity += f" (was {r['severity_original']})"
    cells = [str(r.get("validator_id"))] + ([str(r.get("validator_type"))] if with_type else [])
    return [shown(c) for c in (*cells, severity, text)]


def results_table(results: list[dict[str, Any]], *, with_type: bool = False, more: str = "") -> RenderableType:
    """Validator results as a table whose cells wrap; off a terminal, :func:`plain_results`."""
    from rich.table import Table  # noqa: PLC0415 rich only when a person reads the output
    from rich.text import Text  # noqa: PLC0415 rich only when a person reads the output

    if plain_stdout():
        return Text(plain_results(results, with_type=with_type, more=more))

    table = Table(show_header=True, header_style="bold", expand=False)
    table.add_column("validator", overflow="fold", min_width=9)
    if with_type:
        table.add_column("type", overflow="fold")
    table.add_column("severity", overflow="fold", min_width=8)
    table.add_column("justification", overflow="fold", ratio=1)
    for r in results:
        table.add_row(*(Text(c) for c in _result_cells(r, with_type=with_type, more=more)))
    return table


def plain_key_values(rows: Sequence[tuple[str, str]]) -> str:
    """:func:`key_values` as text: keys padded, a value's further lines indented under its first."""
    width = max((len(key) for key, _value in rows), default=0)
    indent = "\n" + " " * (width + 4)
    return "\n".join(f"  {key:<{width}}  {value.replace(chr(10), indent)}" for key, value in rows)


def plain_results(results: list[dict[str, Any]], *, with_type: bool = False, more: str = "") -> str:
    """:func:`results_table` as text: a header line, then one block per validator."""
    header = ["validator", *(["type"] if with_type else []), "severity", "justification"]
    rows = [_result_cells(r, with_type=with_type, more=more) for r in results]
    table = [header, *rows]
    widths = [max(len(line) for cells in table for line in cells[i].split("\n")) for i in range(len(header) - 1)]
    lines = []
    for cells in table:
        lead = "  ".join(f"{c:<{w}}" for c, w in zip(cells[:-1], widths, strict=True))
        indent = "\n" + " " * (len(lead) + 2)
        lines.append(f"{lead}  {cells[-1].replace(chr(10), indent)}".rstrip())
    return "\n".join(lines)


def listing(
    columns: tuple[str, ...], rows: Sequence[tuple[str, ...]], *, keep_whole: tuple[str, ...]
) -> RenderableType:
    """Rows as a table when the terminal shows the ``keep_whole`` columns (identifiers a person
    copies) unbroken, else one block per row; never ellipsised. Off a terminal, aligned lines."""
    from rich.text import Text  # noqa: PLC0415 rich only when a person reads the output

    every = [columns, *rows]
    widths = [max(len(r[i]) for r in every) for i in range(len(columns))]
    if plain_stdout():  # aligned lines, the last column unpadded
        lines = ("  ".join([*(f"{c:<{w}}" for c, w in zip(r[:-1], widths, strict=False)), r[-1]]) for r in every)
        return Text("\n".join(line.rstrip() for line in lines))
    whole = {columns.index(c): widths[columns.index(c)] for c in keep_whole}
    # identifier columns at full width, the others at up to 12; then borders and padding
    need = sum(whole.get(i, min(12, w)) for i, w in enumerate(widths)) + 3 * len(columns) + 1
    if need <= console().width:
        return _table(columns, rows, whole)
    return _blocks(columns, rows, next(iter(whole), 0))


def _table(columns: tuple[str, ...], rows: Sequence[tuple[str, ...]], whole: dict[int, int]) -> RenderableType:
    """The columns in ``whole`` (index: width) never wrap."""
    from rich.table import Table  # noqa: PLC0415 rich only when a person reads the output
    from rich.text import Text  # noqa: PLC0415 rich only when a person reads the output

    table = Table(header_style="bold")
    for i, col in enumerate(columns):
        if i in whole:
            table.add_column(col, no_wrap=True, min_width=whole[i])
        else:
            table.add_column(col, overflow="fold")
    for r in rows:
        table.add_row(*(Text(c) for c in r))
    return table


def _blocks(columns: tuple[str, ...], rows: Sequence[tuple[str, ...]], key: int) -> RenderableType:
    """Each row's ``key`` column, then its other values."""
    from rich.console import Group  # noqa: PLC0415 rich only when a person reads the output
    from rich.padding import Padding  # noqa: PLC0415 rich only when a person reads the output
    from rich.text import Text  # noqa: PLC0415 rich only when a person reads the output

    blocks: list[RenderableType] = []
    for r in rows:
        rest = [(columns[i], Text(r[i])) for i in range(len(columns)) if i != key and r[i]]
        blocks += [Text(r[key], style="bold"), Padding(key_values(rest), (0, 0, 0, 2), expand=False)]
    return Group(*blocks)
