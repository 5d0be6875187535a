from __future__ import annotations

import json
import stat
import threading
from pathlib import Path

import pytest

from snodo.base.errors import StateError
from snodo.state.atomic import (
    atomic_create_bytes,
    atomic_write_json,
    atomic_write_text,
    file_lock,
    load_record,
    read_json,
)
from snodo.state.home import snodo_home
from snodo.state.sessions import ProjectState


def test_write_replaces_whole_file_with_mode_and_leaves_no_temp(tmp_path: Path) -> None:
    target = tmp_path / "state.json"
    atomic_write_json(target, {"a": 1})
    atomic_write_text(target, '{"b": 2}', mode=0o600)
    assert read_json(target) == {"b": 2}
    assert stat.S_IMODE(target.stat().st_mode) == 0o600
    assert [p.name for p in tmp_path.iterdir()] == ["state.json"]


def test_corrupt_file_is_reported_with_path_and_left_untouched(tmp_path: Path) -> None:
    target = tmp_path / "state.json"
    target.write_text('{"current_mode": ')
    with pytest.raises(StateError, match=r"state\.json is corrupt") as caught:
        read_json(target)
    assert str(target) in str(caught.value)
    assert target.read_text() == '{"current_mode": '


def test_missing_file_is_not_a_state_error(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError):
        read_json(tmp_path / "absent.json")


@pytest.mark.parametrize("value", [{"x": object()}, {"x": float("nan")}])
def test_unserialisable_value_is_refused_and_old_content_kept(tmp_path: Path, value: object) -> None:
    target = tmp_path / "s.json"
    atomic_write_json(target, {"old": True})
    with pytest.raises(StateError, match="not JSON-serialisable"):
        atomic_write_json(target, value)
    assert json.loads(target.read_text()) == {"old": True}


def test_create_never_overwrites(tmp_path: Path) -> None:
    target = tmp_path / "key"
    assert atomic_create_bytes(target, b"first") is True
    assert atomic_create_bytes(target, b"second") is False
    assert target.read_bytes() == b"first"
    assert stat.S_IMODE(target.stat().st_mode) == 0o600


def test_record_with_wrong_type_names_file_and_field(tmp_path: Path) -> None:
    target = tmp_path / "state.json"
    target.write_text(json.dumps({"current_mode": 3, "active_sessions": []}))
    with pytest.raises(StateError, match=r"state\.json is corrupt.*current_mode"):
        load_record(target, ProjectState)
    target.write_text(json.dumps({"current_mode": "dev", "active_sessions": [], "extra": 1}))
    with pytest.raises(StateError, match="extra"):
        load_record(target, ProjectState)


def test_file_lock_excludes_threads(tmp_path: Path) -> None:
    counter = tmp_path / "counter"
    counter.write_text("0")

    def bump() -> None:
        for _ in range(50):
            with file_lock(counter):
                counter.write_text(str(int(counter.read_text()) + 1))

    threads = [threading.Thread(target=bump) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert counter.read_text() == "200"


def test_home_comes_from_env_and_is_private(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SNODO_HOME", str(tmp_path / "custom"))
    assert snodo_home() == tmp_path / "custom"
    assert stat.S_IMODE((tmp_path / "custom").stat().st_mode) == 0o700
    monkeypatch.setenv("SNODO_HOME", "")
    monkeypatch.setenv("HOME", str(tmp_path / "user"))
    assert snodo_home() == tmp_path / "user" / ".snodo"
