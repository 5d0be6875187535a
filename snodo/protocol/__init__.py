"""Loading a protocol: strict parsing (:mod:`.loader`) and well-formedness (:mod:`.wellformed`)."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from attrs import frozen

from snodo.base.errors import ProtocolError
from snodo.protocol.committed import InForce
from snodo.protocol.loader import find_protocol, parse_protocol, project_root_for, read_protocol_file
from snodo.protocol.models import Protocol
from snodo.protocol.wellformed import Violation, check, located

if TYPE_CHECKING:
    from snodo.plugin.host import PluginHost

__all__ = [
    "LoadedProtocol",
    "check",
    "find_protocol",
    "load_protocol",
    "located",
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
    in_force: InForce | None = None  # which committed version this is (None: read as a plain file)

    def provenance(self) -> dict[str, str | None]:
        """``protocol_commit`` and ``protocol_sha256``, recorded with every validation and run."""
        return self.in_force.provenance() if self.in_force is not None else {}


def load_protocol(path: Path, host: PluginHost | None = None, *, in_force: InForce | None = None) -> LoadedProtocol:
    """Load strictly and check well-formedness; any error refuses the whole protocol. With
    ``in_force``, its text is parsed, not the file."""
    protocol = parse_protocol(in_force.text, source=str(path)) if in_force else read_protocol_file(path)
    violations = check(protocol, host)
    if violations:  # only then is the YAML composed again, for the lines
        violations = located(violations, in_force.text if in_force else path.read_text(encoding="utf-8"), str(path))
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
        in_force=in_force,
    )
