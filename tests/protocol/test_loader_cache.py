"""The parsed-document cache of the protocol loader (#26: PyYAML only when a text is new).

A protocol text that loaded cleanly is kept as JSON under the cache directory the command
line passes (``$SNODO_HOME/cache/protocol``); the next load of the same text structures that
document instead of parsing YAML. What comes back must be exactly what parsing gives, and a
cache entry that is damaged or no longer structures must never change the answer.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from snodo.base.errors import ProtocolError
from snodo.protocol.loader import CACHE_ENTRIES, parse_protocol
from tests.conftest import TRIVIAL_PROTOCOL, git, make_repo

OTHER = TRIVIAL_PROTOCOL.replace("protocol_id: t", "protocol_id: other")


def test_a_cached_text_gives_the_protocol_parsing_gives(tmp_path: Path) -> None:
    cache = tmp_path / "cache"
    parsed = parse_protocol(TRIVIAL_PROTOCOL, source="p.yml")
    first = parse_protocol(TRIVIAL_PROTOCOL, source="p.yml", cache_dir=cache)
    (entry,) = cache.glob("*.json")
    again = parse_protocol(TRIVIAL_PROTOCOL, source="p.yml", cache_dir=cache)
    assert parsed == first == again
    assert parse_protocol(OTHER, source="p.yml", cache_dir=cache).protocol_id == "other"
    assert len(list(cache.glob("*.json"))) == 2  # one document per text
    assert _document(entry)["protocol_id"] == "t"


def _document(entry: Path) -> dict[str, object]:
    """The protocol document a cache entry keeps (:mod:`snodo.cachefiles`: key and text)."""
    kept = json.loads(entry.read_text())
    assert kept["key"] == entry.stem
    document: dict[str, object] = json.loads(kept["text"])
    return document


def test_a_damaged_or_stale_entry_is_parsed_again_and_errors_keep_their_lines(tmp_path: Path) -> None:
    cache = tmp_path / "cache"
    parse_protocol(TRIVIAL_PROTOCOL, cache_dir=cache)
    (entry,) = cache.glob("*.json")
    key = entry.stem
    for damage in (
        "{not json",
        json.dumps({"key": key, "text": json.dumps({"protocol_id": "t", "modes": "no"})}),
        json.dumps({"key": key, "text": json.dumps({"protocol_id": "x"})}),
        json.dumps({"key": key, "text": "{not json"}),
        json.dumps({"key": "another", "text": json.dumps({"protocol_id": "t"})}),
        "[]",
    ):
        entry.write_text(damage)
        assert parse_protocol(TRIVIAL_PROTOCOL, cache_dir=cache) == parse_protocol(TRIVIAL_PROTOCOL)
        assert _document(entry)["protocol_id"] == "t"  # written again from the text
    bad = TRIVIAL_PROTOCOL.replace("coder: mock", "coder: mock\n    colour: blue")
    for _ in range(2):  # a refused text is never cached: the second load refuses alike
        with pytest.raises(ProtocolError) as refused:
            parse_protocol(bad, source="p.yml", cache_dir=cache)
        assert any(p.startswith("p.yml:8: unknown key 'colour'") for p in refused.value.problems), refused.value
    assert len(list(cache.glob("*.json"))) == 1


def test_the_cache_keeps_only_the_newest_entries(tmp_path: Path) -> None:
    cache = tmp_path / "cache"
    for i in range(CACHE_ENTRIES + 3):
        parse_protocol(TRIVIAL_PROTOCOL.replace("name: t", f"name: t{i}"), cache_dir=cache)
    assert len(list(cache.glob("*.json"))) == CACHE_ENTRIES
    assert not list(cache.glob(".*"))  # no temporary file left behind


def test_a_second_run_of_the_same_protocol_does_not_import_yaml(tmp_path: Path, snodo_cli) -> None:  # type: ignore[no-untyped-def]
    repo = make_repo(tmp_path / "repo")
    (repo / ".snodo").mkdir()
    (repo / ".snodo" / "protocol.yml").write_text(TRIVIAL_PROTOCOL)
    git(repo, "add", ".snodo")
    git(repo, "commit", "-q", "-m", "protocol")
    loaded = []
    for n in range(2):
        r = snodo_cli("run", f"add module {n}", "--mock", "--json", cwd=repo, env={"PYTHONPROFILEIMPORTTIME": "1"})
        assert r.returncode == 0, r
        loaded.append({line.rsplit("|", 1)[1].strip() for line in r.stderr.splitlines() if "import time:" in line})
    assert "yaml" in loaded[0] and "snodo.protocol.yamldoc" in loaded[0]
    assert "yaml" not in loaded[1] and "snodo.protocol.yamldoc" not in loaded[1]


def test_the_loader_imports_no_yaml_until_a_text_is_parsed() -> None:
    code = (
        "import sys\n"
        "import snodo.protocol, snodo.api\n"
        "assert 'yaml' not in sys.modules, 'yaml imported'\n"
        "from snodo.protocol import parse_protocol\n"
        "parse_protocol('protocol_id: p')\n"
    )
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env={**os.environ})
    assert "yaml imported" not in r.stderr and "ProtocolError" in r.stderr, r.stderr
