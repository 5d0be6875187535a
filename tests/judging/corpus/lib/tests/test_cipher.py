from textkit.cipher import caesar, rot13


def test_caesar_shift():
    assert caesar("abc xyz", 3) == "def abc"


def test_caesar_keeps_case_and_punctuation():
    assert caesar("Hello, World!", 1) == "Ifmmp, Xpsme!"


def test_caesar_negative_undoes():
    assert caesar(caesar("Secret", 11), -11) == "Secret"


def test_rot13_involution(sample_text):
    assert rot13(rot13(sample_text)) == sample_text
