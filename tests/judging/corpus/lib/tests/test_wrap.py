import pytest
from helpers import fits

from textkit.wrap import indent, wrap


def test_wrap_short_text_one_line():
    assert wrap("hello world", 20) == ["hello world"]


def test_wrap_breaks_at_width():
    assert wrap("the quick brown fox", 10) == ["the quick", "brown fox"]


def test_wrap_exact_width():
    assert wrap("abc def", 7) == ["abc def"]


def test_wrap_long_word_alone():
    assert wrap("a supercalifragilistic b", 5) == ["a", "supercalifragilistic", "b"]


def test_wrap_collapses_whitespace():
    assert wrap("  a \n\n b\tc  ", 80) == ["a b c"]


def test_wrap_blank():
    assert wrap("   ", 10) == []


def test_wrap_rejects_zero_width():
    with pytest.raises(ValueError):
        wrap("a", 0)


def test_wrap_paragraph_fits(sample_text):
    lines = wrap(sample_text, 24)
    assert fits(lines, 24)
    assert " ".join(lines) == " ".join(sample_text.split())


def test_indent():
    assert indent("a\n\nb\n", "> ") == "> a\n\n> b\n"
