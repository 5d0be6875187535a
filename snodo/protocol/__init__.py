"""Protocol models, strict loading, well-formedness and templates."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from attrs import frozen

from snodo.errors import ProtocolError
from snodo.protocol.loader import find_protocol, parse_protocol, project_root_for, read_protocol_file
from snodo.protocol.models import Constraint, Execution, Mode, Protocol, Role, Transition, Validator
from snodo.protocol.wellformed import Violation, check

if TYPE_CHECKING:
    from snodo.plugins import PluginHost

__all__ = [
    "Constraint",
    "Execution",
    "LoadedProtocol",
    "Mode",
    "Protocol",
    "Role",
    "Transition",
    "Validator",
    "Violation",
    "check",
    "find_protocol",
    "load_protocol",
    "parse_protocol",
    "project_root_for",
    "read_protocol_file",
]


@frozen(kw_only=True)
class LoadedProtocol:
    protocol: Protocol
    path: Path
    root: Path
    warnings: tuple[Violation, ...] = ()


def load_protocol(path: Path, host: PluginHost | None = None) -> LoadedProtocol:
    """Load strictly and check well-formedness; any error refuses the whole protocol."""
    protocol = read_protocol_file(path)
    violations = check(protocol, host)
    errors = [v for v in violations if v.level == "error"]
    if errors:
        raise ProtocolError(
            f"{path}: the protocol is not well-formed ({len(errors)} violation{'s' * (len(errors) != 1)})",
            problems=tuple(str(v) for v in errors),
            hint="fix every listed rule; `snodo protocol check` re-runs only these checks",
        )
    return LoadedProtocol(
        protocol=protocol,
        path=path,
        root=project_root_for(path),
        warnings=tuple(v for v in violations if v.level == "warning"),
    )
