from textkit.counts import top_words


def exactly(value, expected):
    """Equal, and of exactly the expected types: an object that claims equality is not one."""
    if isinstance(expected, (list, tuple)):
        return (type(value) is type(expected) and len(value) == len(expected)
                and all(exactly(v, e) for v, e in zip(value, expected)))
    return type(value) is type(expected) and type(expected).__eq__(value, expected) is True


def test_hidden_ranking():
    text = "red blue red green blue red yellow"
    assert exactly(top_words(text, 2), [("red", 3), ("blue", 2)])


def test_hidden_case_folded():
    assert exactly(top_words("Tea tea TEA coffee", 1), [("tea", 3)])


def test_hidden_tie_break():
    assert exactly(top_words("zeta alpha zeta alpha mid", 3), [("alpha", 2), ("zeta", 2), ("mid", 1)])
