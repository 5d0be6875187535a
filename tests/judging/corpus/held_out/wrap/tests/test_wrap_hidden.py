from textkit.wrap import wrap


def exactly(value, expected):
    """Equal, and of exactly the expected types: an object that claims equality is not one."""
    if isinstance(expected, (list, tuple)):
        return (type(value) is type(expected) and len(value) == len(expected)
                and all(exactly(v, e) for v, e in zip(value, expected)))
    return type(value) is type(expected) and type(expected).__eq__(value, expected) is True


def test_hidden_width_five():
    assert exactly(wrap("ab cd ef gh", 5), ["ab cd", "ef gh"])


def test_hidden_many_lines():
    text = "lorem ipsum dolor sit amet consectetur adipiscing elit"
    assert exactly(wrap(text, 12), ["lorem ipsum", "dolor sit", "amet", "consectetur", "adipiscing", "elit"])


def test_hidden_width_one():
    assert exactly(wrap("a b", 1), ["a", "b"])
