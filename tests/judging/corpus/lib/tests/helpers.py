"""Checks shared by several test modules."""

import re


def is_slug(text: str, sep: str = "-") -> bool:
    return bool(re.fullmatch(rf"[a-z0-9]+(?:{re.escape(sep)}[a-z0-9]+)*", text))


def fits(lines: list[str], width: int) -> bool:
    return all(len(line) <= width or " " not in line for line in lines)
