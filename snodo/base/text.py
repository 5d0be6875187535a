"""Showing agent-written text to a person: :func:`shown` is the one sanitiser.

A spec, a proposal's justification, a file name or a validator's message may come from
the agent being governed. Printed raw, its control characters and escape sequences are
*interpreted* by the terminal: an agent could clear the screen and repaint what a person
reads right before a y/N prompt. Every such piece of text goes through :func:`shown`, which
makes each of those characters visible as an escape (``\\x1b``, ``\\u202e``) instead.
It does not escape rich markup: callers printing through rich still escape that.
"""

from __future__ import annotations

import re

__all__ = ["shown"]

# C0 controls but tab and newline, DEL and C1 controls, unpaired surrogates, and the
# characters that change how the text around them is displayed without being visible
# themselves (bidirectional overrides and isolates, zero-width marks, line and paragraph
# separators): "Trojan source".
_INVISIBLE = "\x00-\x08\x0b-\x1f\x7f-\x9f\u061c\u200b-\u200f\u2028-\u202e\u2060-\u2064\u2066-\u2069\ufeff\ud800-\udfff"
_UNSAFE_MULTILINE = re.compile(f"[{_INVISIBLE}]")
_UNSAFE_LINE = re.compile(f"[\t\n{_INVISIBLE}]")


def _escape(match: re.Match[str]) -> str:
    code = ord(match.group())
    return f"\\x{code:02x}" if code <= 0xFF else f"\\u{code:04x}"


def shown(text: object, *, multiline: bool = True) -> str:
    """``text`` safe to print: control, invisible-format and unpaired-surrogate characters
    are replaced by their visible escapes (``\x1b`` becomes the four characters ``\\x1b``).

    Line breaks and tabs are kept when ``multiline`` (a spec stays readable); a
    single-line field (a file name, an id) passes ``multiline=False`` so that a newline
    cannot start a fake line of output either.
    """
    value = text if isinstance(text, str) else str(text)
    return (_UNSAFE_MULTILINE if multiline else _UNSAFE_LINE).sub(_escape, value)
