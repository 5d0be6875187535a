"""Roman numerals, 1 to 3999."""

_NUMERALS = (
    (1000, "M"), (900, "CM"), (500, "D"), (400, "CD"), (100, "C"), (90, "XC"),
    (50, "L"), (40, "XL"), (10, "X"), (9, "IX"), (5, "V"), (4, "IV"), (1, "I"),
)


def to_roman(number: int) -> str:
    if not isinstance(number, int) or not 0 < number < 4000:
        raise ValueError(f"out of range: {number!r}")
    out = []
    for value, numeral in _NUMERALS:
        count, number = divmod(number, value)
        out.append(numeral * count)
    return "".join(out)


def from_roman(text: str) -> int:
    """The integer a canonical Roman numeral stands for; anything else is a ValueError."""
    if not isinstance(text, str) or not text:
        raise ValueError(f"not a Roman numeral: {text!r}")
    upper = text.upper()
    total, index = 0, 0
    for value, numeral in _NUMERALS:
        while upper.startswith(numeral, index):
            total += value
            index += len(numeral)
    if index != len(upper) or not 0 < total < 4000 or to_roman(total) != upper:
        raise ValueError(f"not a Roman numeral: {text!r}")
    return total
