"""Caesar ciphers."""

import string


def caesar(text: str, shift: int) -> str:
    shift %= 26
    lower, upper = string.ascii_lowercase, string.ascii_uppercase
    table = str.maketrans(lower + upper, lower[shift:] + lower[:shift] + upper[shift:] + upper[:shift])
    return text.translate(table)


def rot13(text: str) -> str:
    return caesar(text, 13)
