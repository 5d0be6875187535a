"""One entry-point group of the installed distributions, read without importlib.metadata.

Every snodo process that loads plugins needs the ``snodo`` group only, yet
``importlib.metadata`` imports the ``email`` package and parses every distribution's
METADATA to answer; together ~40 ms of each governed run (#26). The files are simple: each
``*.dist-info`` / ``*.egg-info`` directory on ``sys.path`` may hold an ``entry_points.txt``
(an INI file, one section per group) and a METADATA / PKG-INFO whose first headers name the
distribution. As importlib.metadata does, the first distribution of a name on ``sys.path``
wins (a later copy of the same distribution is shadowed). ``tests/test_entrypoints.py``
checks the answer against importlib.metadata's.

Of the hundred or so ``entry_points.txt`` files of a typical environment only the few that
contain the group's header (``[snodo]``) can name a member: the others are skipped on a
substring test, and the few left are read line by line (no ``configparser``).
"""

from __future__ import annotations

import importlib
import os
import re
import sys
from functools import reduce
from typing import Any

from attrs import frozen

_INFO_SUFFIXES = (".dist-info", ".egg-info")


@frozen(kw_only=True)
class EntryPoint:
    name: str
    value: str
    distribution: str | None
    version: str | None

    def load(self) -> Any:
        """The object ``module[:attr.attr]`` names, importing the module."""
        module, _, attrs = self.value.partition(":")
        target = importlib.import_module(module.strip())
        return reduce(getattr, filter(None, attrs.strip().split(".")), target)


def _normalized(name: str) -> str:
    return re.sub(r"[-_.]+", "_", name).lower()


def _headers(info: str) -> tuple[str | None, str | None]:
    """``(Name, Version)`` from the metadata file's header block."""
    name = version = None
    for filename in ("METADATA", "PKG-INFO"):
        try:
            with open(os.path.join(info, filename), encoding="utf-8", errors="replace") as f:
                for line in f:
                    if not line.strip():
                        break
                    key, _, value = line.partition(":")
                    if key == "Name" and name is None:
                        name = value.strip()
                    elif key == "Version" and version is None:
                        version = value.strip()
        except OSError:
            continue
        return name, version
    return name, version


def entry_points(group: str) -> list[EntryPoint]:
    """The entry points of ``group`` in the distributions importable from ``sys.path``."""
    found: list[EntryPoint] = []
    seen: set[str] = set()
    for entry in sys.path:
        directory = entry or "."
        try:
            names = sorted(os.listdir(directory))
        except OSError:
            continue
        for item in names:
            if not item.endswith(_INFO_SUFFIXES):
                continue
            info = os.path.join(directory, item)
            key = _normalized(item.rpartition(".")[0].partition("-")[0])
            if key in seen or not os.path.isdir(info):
                continue
            seen.add(key)
            members = _members(os.path.join(info, "entry_points.txt"), group)
            if members:
                dist, version = _headers(info)
                found.extend(EntryPoint(name=n, value=v, distribution=dist, version=version) for n, v in members)
    return found


def _members(path: str, group: str) -> list[tuple[str, str]]:
    """``(name, value)`` of ``group`` in one ``entry_points.txt``, read as importlib.metadata
    reads it (lines stripped, ``#`` comments skipped, ``[name]`` starts a section, ``name =
    value`` pairs); none when the file is missing or unreadable.

    A header that names the group contains ``[group]``, so a file without that text has no
    member and is not read line by line at all.
    """
    try:
        with open(path, encoding="utf-8") as f:
            text = f.read()
    except (OSError, UnicodeDecodeError):
        return []
    if f"[{group}]" not in text:
        return []
    found: list[tuple[str, str]] = []
    section = None
    for line in map(str.strip, text.splitlines()):
        if not line or line.startswith("#"):
            continue
        if line.startswith("[") and line.endswith("]"):
            section = line.strip("[]")
        elif section == group and "=" in line:  # importlib.metadata fails on a line without "="
            name, _, value = line.partition("=")
            found.append((name.strip(), value.strip()))
    return found
