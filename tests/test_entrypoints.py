"""snodo.entrypoints answers as importlib.metadata does (#26: it replaced it on the run path)."""

from __future__ import annotations

import sys
from importlib import metadata
from pathlib import Path

import pytest

from snodo.entrypoints import entry_points


def _theirs(group: str) -> list[tuple[str, str, str | None, str | None]]:
    return sorted(
        (e.name, e.value, e.dist.metadata["Name"] if e.dist else None, e.dist.version if e.dist else None)
        for e in metadata.entry_points(group=group)
    )


def _ours(group: str) -> list[tuple[str, str, str | None, str | None]]:
    return sorted((e.name, e.value, e.distribution, e.version) for e in entry_points(group))


def _dist(site: Path, dirname: str, name: str, version: str, eps: str) -> None:
    info = site / dirname
    info.mkdir(parents=True)
    (info / ("PKG-INFO" if dirname.endswith(".egg-info") else "METADATA")).write_text(
        f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\nSummary: x: y\n\nName: not-a-header\n"
    )
    (info / "entry_points.txt").write_text(eps)


@pytest.mark.parametrize("group", ["snodo", "console_scripts", "pytest11", "no-such-group"])
def test_the_installed_groups_match_importlib_metadata(group: str) -> None:
    assert _ours(group) == _theirs(group)


def test_shadowed_egg_and_broken_distributions_match_importlib_metadata(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    first, second = tmp_path / "first", tmp_path / "second"
    _dist(
        first,
        "Probe_Dist-1.0.dist-info",
        "probe-dist",
        "1.0",
        "[snodo]\nprobe = probe_mod:Thing.attr\nOther.Name = x.y\n",
    )
    _dist(second, "probe.dist-2.0.dist-info", "probe.dist", "2.0", "[snodo]\nshadowed = nope\n")
    _dist(second, "eggy.egg-info", "eggy", "0.1", "[snodo]\neggy = eggy_mod\n[other]\nz = z\n")
    _dist(second, "broken-1.dist-info", "broken", "1", "this is [not an ini\n")
    (second / "probe_mod.py").write_text("class Thing:\n    attr = 42\n")
    monkeypatch.setattr(sys, "path", [str(first), str(second), *sys.path])
    assert [e for e in _ours("snodo") if e[0] in {"probe", "Other.Name", "shadowed", "eggy"}] == [
        ("Other.Name", "x.y", "probe-dist", "1.0"),
        ("eggy", "eggy_mod", "eggy", "0.1"),
        ("probe", "probe_mod:Thing.attr", "probe-dist", "1.0"),
    ]
    assert _ours("snodo") == _theirs("snodo")
    assert next(e for e in entry_points("snodo") if e.name == "probe").load() == 42
