from textkit.counts import top_words, word_counts, words


def test_words_lowercase_and_apostrophes():
    assert words("Don't STOP 'now'") == ["don't", "stop", "now"]


def test_word_counts(sample_text):
    counts = word_counts(sample_text)
    assert counts["the"] == 5
    assert counts["fox"] == 3
    assert counts["gone"] == 1


def test_word_counts_empty():
    assert word_counts("") == {}


def test_top_words_order(sample_text):
    assert top_words(sample_text, 3) == [("the", 5), ("fox", 3), ("dog", 2)]


def test_top_words_ties_alphabetical():
    assert top_words("b a c b a c d", 3) == [("a", 2), ("b", 2), ("c", 2)]


def test_top_words_more_than_available():
    assert top_words("one two", 5) == [("one", 1), ("two", 1)]


def test_top_words_zero():
    assert top_words("a a a", 0) == []
