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


def test_only_files_that_name_the_group_are_read_and_a_plugin_installed_later_is_seen(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The header test skips a file unread; a header inside a comment or another section's
    text is no header; a new distribution is found by the next look (nothing is cached)."""
    site = tmp_path / "site"
    _dist(site, "other-1.dist-info", "other", "1", "[console_scripts]\nx = y:z\n")
    _dist(site, "mention-1.dist-info", "mention", "1", "[other]\n# see [snodo] below? no\nnot = this\n")
    _dist(
        site,
        "tricky-1.dist-info",
        "tricky",
        "1",
        "[snodo]\n# a comment\n  spaced  =  tricky_mod:obj  \n[snodo.more]\nnot = this\n[[snodo]]\nagain = x\n",
    )
    monkeypatch.setattr(sys, "path", [str(site)])
    assert (
        _ours("snodo")
        == _theirs("snodo")
        == [
            ("again", "x", "tricky", "1"),
            ("spaced", "tricky_mod:obj", "tricky", "1"),
        ]
    )
    _dist(site, "late-2.dist-info", "late", "2", "[snodo]\nlate = late_mod\n")
    assert ("late", "late_mod", "late", "2") in _ours("snodo") == _theirs("snodo")
    (site / "late-2.dist-info" / "entry_points.txt").unlink()
    assert _ours("snodo") == _theirs("snodo") and "late" not in {e[0] for e in _ours("snodo")}
    # a line without "=" (importlib.metadata raises on it) is skipped, the rest still read
    _dist(site, "broken-3.dist-info", "broken", "3", "[snodo]\nno equals sign\nok = ok_mod\n")
    assert ("ok", "ok_mod", "broken", "3") in _ours("snodo")
