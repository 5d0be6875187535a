"""Loading a protocol: strict parsing (:mod:`.loader`) and well-formedness (:mod:`.wellformed`)."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from attrs import frozen

from snodo.base.errors import ProtocolError
from snodo.protocol.committed import InForce
from snodo.protocol.loader import find_protocol, parse_protocol, project_root_for, read_composed, read_protocol_file
from snodo.protocol.models import Protocol
from snodo.protocol.wellformed import Violation, check, located

if TYPE_CHECKING:
    from snodo.plugin.host import PluginHost

__all__ = [
    "LoadedProtocol",
    "check",
    "check_file",
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
    in_force: InForce | None = None  # which committed version this is (None: read as a plain file)

    def provenance(self) -> dict[str, str | None]:
        """What every validation and run records about the rules that judged it."""
        if self.in_force is None:
            return {}
        return {"protocol_commit": self.in_force.commit, "protocol_sha256": self.in_force.digest}


def check_file(path: Path, host: PluginHost | None, text: str | None = None) -> tuple[Protocol, list[Violation]]:
    """The protocol at ``path`` (``text``: its content) and its located violations, from one parse."""
    protocol, root = read_composed(path, text)
    return protocol, located(check(protocol, host), root, str(path))


def load_protocol(path: Path, host: PluginHost | None = None, *, in_force: InForce | None = None) -> LoadedProtocol:
    """Load strictly and check well-formedness; any error refuses the whole protocol (``in_force``: its text)."""
    protocol, violations = check_file(path, host, in_force.text if in_force else None)
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
