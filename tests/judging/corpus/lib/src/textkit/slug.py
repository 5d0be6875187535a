"""URL slugs."""

import re
import unicodedata

_NOT_WORD = re.compile(r"[^a-z0-9]+")


def slugify(text: str, sep: str = "-", max_length: int | None = None) -> str:
    """Lower-case ASCII words of ``text`` joined by ``sep``; accents folded, the rest dropped.

    ``max_length`` cuts the slug without leaving a trailing separator."""
    folded = unicodedata.normalize("NFKD", text).encode("ascii", "ignore").decode("ascii")
    slug = _NOT_WORD.sub(sep, folded.lower()).strip(sep)
    if max_length is not None:
        slug = slug[:max_length].rstrip(sep)
    return slug
