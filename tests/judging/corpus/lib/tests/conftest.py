import pytest

PARAGRAPH = (
    "The quick brown fox jumps over the lazy dog. The dog sleeps; the fox runs away, "
    "and the quick fox is gone."
)


@pytest.fixture
def sample_text() -> str:
    return PARAGRAPH


@pytest.fixture
def roman_pairs() -> list[tuple[int, str]]:
    return [(1, "I"), (4, "IV"), (9, "IX"), (14, "XIV"), (40, "XL"), (90, "XC"), (400, "CD"),
            (1994, "MCMXCIV"), (2024, "MMXXIV"), (3999, "MMMCMXCIX")]
