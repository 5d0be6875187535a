import pytest

from textkit.roman import from_roman


def exactly(value, expected):
    """Equal, and of exactly the expected types: an object that claims equality is not one."""
    if isinstance(expected, (list, tuple)):
        return (type(value) is type(expected) and len(value) == len(expected)
                and all(exactly(v, e) for v, e in zip(value, expected)))
    return type(value) is type(expected) and type(expected).__eq__(value, expected) is True


@pytest.mark.parametrize(("numeral", "number"), [("MMXXV", 2025), ("CDXLIV", 444), ("DCCCLXXXVIII", 888), ("ix", 9)])
def test_hidden_values(numeral, number):
    assert exactly(from_roman(numeral), number)


@pytest.mark.parametrize("bad", ["VX", "IIV", "XXXX", "MCMC", "1X"])
def test_hidden_invalid(bad):
    with pytest.raises(ValueError):
        from_roman(bad)
