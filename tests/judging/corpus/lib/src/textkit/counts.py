"""Word frequencies."""

import re
from collections import Counter

_WORD = re.compile(r"[a-z0-9']+")


def words(text: str) -> list[str]:
    return [w.strip("'") for w in _WORD.findall(text.lower()) if w.strip("'")]


def word_counts(text: str) -> dict[str, int]:
    return dict(Counter(words(text)))


def top_words(text: str, n: int) -> list[tuple[str, int]]:
    """The ``n`` most frequent words with their counts, most frequent first, ties alphabetical."""
    if n < 0:
        raise ValueError("n must not be negative")
    ranked = sorted(Counter(words(text)).items(), key=lambda item: (-item[1], item[0]))
    return ranked[:n]
