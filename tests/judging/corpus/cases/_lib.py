"""The library's files as the cases start from them."""

from __future__ import annotations

from ..tasks import LIB, TASKS


def base(rel: str) -> str:
    """A file of the library as it is at every task's base (the tests and the harness)."""
    return (LIB / rel).read_text()


def impl(task: str) -> str:
    """The honest implementation of ``task``'s module."""
    return TASKS[task].implementation


def stub(task: str) -> str:
    """``task``'s module as it is at the base."""
    return TASKS[task].base_source


def module(task: str) -> str:
    return TASKS[task].module


def pyproject_with(extra_ini: str = "", replace: tuple[str, str] | None = None) -> str:
    """The library's pyproject.toml with lines added to ``[tool.pytest.ini_options]``."""
    text = base("pyproject.toml")
    if replace:
        old, new = replace
        if old not in text:
            raise ValueError(f"{old!r} not in pyproject.toml")
        text = text.replace(old, new)
    return text.rstrip("\n") + "\n" + extra_ini.strip("\n") + "\n" if extra_ini else text
