"""The one sanitiser for agent-written text shown to a person."""

from __future__ import annotations

import pytest

from snodo.base.text import shown


@pytest.mark.parametrize(
    ("raw", "visible"),
    [
        ("clear\x1b[2Jscreen", "clear\\x1b[2Jscreen"),
        ("title\x1b]0;pwned\x07", "title\\x1b]0;pwned\\x07"),
        ("over\rwrite", "over\\x0dwrite"),
        ("back\x08space", "back\\x08space"),
        ("c1\x9b31m", "c1\\x9b31m"),
        ("bidi\u202eexe.txt", "bidi\\u202eexe.txt"),
        ("zero\u200bwidth", "zero\\u200bwidth"),
        ("line\u2028sep", "line\\u2028sep"),
        ("lone\ud800surrogate", "lone\\ud800surrogate"),
        ("del\x7f", "del\\x7f"),
    ],
)
def test_control_and_invisible_characters_are_shown_escaped(raw: str, visible: str) -> None:
    assert shown(raw) == visible
    assert shown(raw, multiline=False) == visible


def test_ordinary_text_is_unchanged() -> None:
    text = "Add a greeting — «bonjour», 日本語, emoji 🎉\n\tindented\n"
    assert shown(text) == text


def test_single_line_fields_escape_line_breaks_too() -> None:
    assert shown("name\nFAKE: approved\tx", multiline=False) == "name\\x0aFAKE: approved\\x09x"


def test_anything_is_turned_into_text() -> None:
    assert shown(None) == "None" and shown(3) == "3"
