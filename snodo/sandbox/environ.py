"""The environment of a confined process is an allowlist (SPEC §9), like Codex's shell
environment policy: an inherited variable reaches confined code only when it is one of the
few every program needs, or a name the protocol (``execution.env``) or the plugin starting
the process (``pass_env``) asked for.

What is refused by default is exactly what an attacker wants: the user's ssh-agent
(``SSH_AUTH_SOCK``), tmux server (``TMUX``), session bus (``DBUS_*``) and every API key
or token. Those never pass unless named; naming one is the protocol author's or plugin's
explicit decision. A variable the caller *sets* (a value not inherited from snodo's own
environment, such as a coder's private ``XDG_CONFIG_HOME``) is the caller's choice and
passes as given. ``HOME`` and ``TMPDIR`` are always private to the run.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterable, Mapping
from pathlib import Path

#: Inherited names every program may see.
ALWAYS = frozenset(
    {"PATH", "LANG", "LANGUAGE", "TERM", "TZ", "COLORTERM", "NO_COLOR", "FORCE_COLOR", "PWD", "USER", "LOGNAME"}
)
#: Never inherited unless named (checked even for names the allowlist would admit).
_SECRET = re.compile(r"^(SSH_AUTH_SOCK|SSH_AGENT_PID|TMUX|TMUX_PANE|DBUS_.*|.*_KEY|.*_TOKEN|.*SECRET.*)$")


def refused_by_default(name: str) -> bool:
    """Whether ``name`` names a socket or secret that is never inherited unless named."""
    return bool(_SECRET.match(name.upper()))


def _allowed(name: str) -> bool:
    return (name in ALWAYS or name.startswith("LC_")) and not refused_by_default(name)


def confined_environment(
    given: Mapping[str, str],
    *,
    named: Iterable[str],
    tmpdir: Path,
    inherited: Mapping[str, str] | None = None,
) -> dict[str, str]:
    """The environment a confined child gets from the one its caller built (``given``).

    A variable of ``given`` passes when it is allowlisted, named in ``named``, or not
    inherited (absent from, or different in, snodo's own environment ``inherited``).
    ``HOME`` is the private ``tmpdir`` itself (one directory less to make and remove).
    """
    parent = os.environ if inherited is None else inherited
    names = set(named)
    out = {key: value for key, value in given.items() if key in names or _allowed(key) or parent.get(key) != value}
    out.update(HOME=str(tmpdir), TMPDIR=str(tmpdir), TMP=str(tmpdir), TEMP=str(tmpdir))
    return out
