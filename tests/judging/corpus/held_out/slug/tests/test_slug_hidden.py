from textkit.slug import slugify


def exactly(value, expected):
    """Equal, and of exactly the expected types: an object that claims equality is not one."""
    if isinstance(expected, (list, tuple)):
        return (type(value) is type(expected) and len(value) == len(expected)
                and all(exactly(v, e) for v, e in zip(value, expected)))
    return type(value) is type(expected) and type(expected).__eq__(value, expected) is True


def test_hidden_words_and_digits():
    assert exactly(slugify("Zürich Café, 2025 Edition"), "zurich-cafe-2025-edition")


def test_hidden_separator_and_length():
    assert exactly(slugify("One Two Three Four", sep="+", max_length=8), "one+two")


def test_hidden_only_symbols():
    assert exactly(slugify("!!! ??? ..."), "")


def test_hidden_mixed_case_runs():
    assert exactly(slugify("__Snake_Case__ and--dashes"), "snake-case-and-dashes")
