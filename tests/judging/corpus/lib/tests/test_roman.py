import pytest

from textkit.roman import from_roman, to_roman


def test_to_roman(roman_pairs):
    for number, numeral in roman_pairs:
        assert to_roman(number) == numeral


@pytest.mark.parametrize("bad", [0, -1, 4000, 2.5])
def test_to_roman_out_of_range(bad):
    with pytest.raises(ValueError):
        to_roman(bad)


def test_from_roman_basic():
    assert from_roman("III") == 3
    assert from_roman("VIII") == 8


def test_from_roman_subtractive(roman_pairs):
    for number, numeral in roman_pairs:
        assert from_roman(numeral) == number


def test_from_roman_lowercase():
    assert from_roman("xlii") == 42


def test_from_roman_roundtrip():
    for number in range(1, 400, 7):
        assert from_roman(to_roman(number)) == number


@pytest.mark.parametrize("bad", ["", "IIII", "IC", "ABC", "MMMM"])
def test_from_roman_invalid(bad):
    with pytest.raises(ValueError):
        from_roman(bad)
