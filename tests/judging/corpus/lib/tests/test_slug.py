import pytest
from helpers import is_slug

from textkit.slug import slugify


def test_basic():
    assert slugify("Hello World") == "hello-world"


def test_punctuation_collapses():
    assert slugify("Hello,   World!!") == "hello-world"


def test_strips_edges():
    assert slugify("  --Hello--  ") == "hello"


def test_accents_folded():
    assert slugify("Crème Brûlée") == "creme-brulee"


def test_custom_separator():
    assert slugify("a b c", sep="_") == "a_b_c"


def test_max_length_no_trailing_separator():
    assert slugify("alpha beta gamma", max_length=11) == "alpha-beta"


def test_empty():
    assert slugify("") == ""


@pytest.mark.parametrize("text", ["Snodo Judges Tests", "x", "2024 Release Notes", "ÀÉÎ õü"])
def test_result_is_a_slug(text):
    assert is_slug(slugify(text))
