"""Printing at the command-line edge: rich for people, plain JSON for scripts."""

from __future__ import annotations

import json
import sys
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from rich.console import Console

_console: Console | None = None
_err_console: Console | None = None


def console() -> Console:
    global _console
    if _console is None:
        from rich.console import Console

        _console = Console(highlight=False, soft_wrap=True)
    return _console


def err_console() -> Console:
    global _err_console
    if _err_console is None:
        from rich.console import Console

        _err_console = Console(stderr=True, highlight=False, soft_wrap=True)
    return _err_console


def emit_json(obj: Any) -> None:
    sys.stdout.write(json.dumps(obj, indent=2, sort_keys=False, default=str) + "\n")
    sys.stdout.flush()


def print_error(exc: BaseException) -> None:
    from rich.markup import escape

    err_console().print(f"[bold red]error:[/] {escape(str(exc))}")


def print_warning(text: str) -> None:
    from rich.markup import escape

    err_console().print(f"[yellow]warning:[/] {escape(text)}")
