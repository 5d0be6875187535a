"""The protocol templates ``snodo init --template`` writes."""

from __future__ import annotations

from importlib import resources

TEMPLATES: dict[str, str] = {"solo": "solo.yml", "team": "team.yml", "2+n": "two_plus_n.yml"}


def template_text(name: str) -> str:
    try:
        filename = TEMPLATES[name]
    except KeyError:
        raise ValueError(f"unknown template {name!r}; choose one of: {', '.join(TEMPLATES)}") from None
    return resources.files(__name__).joinpath(filename).read_text(encoding="utf-8")
