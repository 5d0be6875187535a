"""Showing agent-written text to a person: :func:`shown` is the one sanitiser. Printed raw,
its control characters and escape sequences would be *interpreted* by the terminal (an agent
could repaint what a person reads before a y/N prompt). Rich markup is the caller's to escape.
"""

from __future__ import annotations

import re

# C0 controls but tab and newline, DEL, C1 controls, unpaired surrogates, and the invisible characters
# that change how the text around them is shown ("Trojan source": bidi overrides, zero-width marks).
_INVISIBLE = "\x00-\x08\x0b-\x1f\x7f-\x9f\u061c\u200b-\u200f\u2028-\u202e\u2060-\u2064\u2066-\u2069\ufeff\ud800-\udfff"
_UNSAFE_MULTILINE = re.compile(f"[{_INVISIBLE}]")
_UNSAFE_LINE = re.compile(f"[\t\n{_INVISIBLE}]")


def _escape(match: re.Match[str]) -> str:
    code = ord(match.group())
    return f"\\x{code:02x}" if code <= 0xFF else f"\\u{code:04x}"


def shown(text: object, *, multiline: bool = True) -> str:
    """``text`` with control, invisible-format and unpaired-surrogate characters replaced by
    visible escapes (``\x1b`` becomes the four characters ``\\x1b``); line breaks and tabs
    kept only when ``multiline``, so a single-line field cannot start a fake line."""
    value = text if isinstance(text, str) else str(text)
    return (_UNSAFE_MULTILINE if multiline else _UNSAFE_LINE).sub(_escape, value)
