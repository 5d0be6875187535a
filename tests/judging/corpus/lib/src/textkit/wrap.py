"""Greedy line wrapping."""


def wrap(text: str, width: int) -> list[str]:
    """Words of ``text`` packed greedily into lines of at most ``width`` characters.

    A word longer than ``width`` stands alone on its line; blank text gives no lines."""
    if width < 1:
        raise ValueError("width must be at least 1")
    lines: list[str] = []
    current = ""
    for word in text.split():
        if not current:
            current = word
        elif len(current) + 1 + len(word) <= width:
            current += " " + word
        else:
            lines.append(current)
            current = word
    if current:
        lines.append(current)
    return lines


def indent(text: str, prefix: str) -> str:
    """Every non-blank line of ``text`` prefixed with ``prefix``."""
    return "".join(prefix + line if line.strip() else line for line in text.splitlines(keepends=True))
